//! etcd-load: closed-loop put load against an etcd cluster, for comparing
//! etcd's durable write rate with fleetq's admission rate (benches/peers).
//!
//! Each of `--clients` tasks sends one request at a time and waits for the
//! reply (like `fleetq bench --clients N --batch 1`); the clients share
//! `--conns` gRPC connections, one per endpoint by default (fleetq bench
//! also holds one connection per node). A request is one Put, or a Txn of
//! `--txn-ops` Puts. Latency is from just before the call to its reply.
//! The last line of output is machine-readable.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, Txn, TxnOp};

const USAGE: &str = "\
usage: etcd-load [options]
  --endpoints URL,...   etcd client URLs [http://127.0.0.1:2379]
  --clients N           concurrent closed-loop clients [32]
  --conns N             gRPC connections shared by the clients, spread over
                        the endpoints round robin [one per endpoint]
  --puts N              total puts to send [20000]
  --duration SECS       send for this long instead of a count of puts
  --value-size BYTES    value size [256]
  --keys N              distinct keys written (overwritten round robin) [100000]
  --txn-ops N           puts per request, as one Txn (1 = plain Put) [1]
  --warmup N            untimed puts per connection before the run [50]";

struct Args {
    endpoints: Vec<String>,
    clients: u64,
    conns: Option<u64>,
    puts: u64,
    duration: Option<Duration>,
    value_size: usize,
    keys: u64,
    txn_ops: u64,
    warmup: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        endpoints: vec!["http://127.0.0.1:2379".into()],
        clients: 32,
        conns: None,
        puts: 20_000,
        duration: None,
        value_size: 256,
        keys: 100_000,
        txn_ops: 1,
        warmup: 50,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag}: missing value\n{USAGE}"))?;
        let num = |v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|e| format!("{flag} {v:?}: {e}"))
        };
        match flag.as_str() {
            "--endpoints" => {
                a.endpoints = value
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| {
                        if s.contains("://") {
                            s.to_string()
                        } else {
                            format!("http://{s}")
                        }
                    })
                    .collect()
            }
            "--clients" => a.clients = num(&value)?,
            "--conns" => a.conns = Some(num(&value)?),
            "--puts" => a.puts = num(&value)?,
            "--duration" => {
                let secs: f64 = value
                    .trim_end_matches('s')
                    .parse()
                    .map_err(|e| format!("--duration {value:?}: {e}"))?;
                a.duration = Some(Duration::from_secs_f64(secs));
            }
            "--value-size" => a.value_size = num(&value)? as usize,
            "--keys" => a.keys = num(&value)?,
            "--txn-ops" => a.txn_ops = num(&value)?,
            "--warmup" => a.warmup = num(&value)?,
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if a.endpoints.is_empty() || a.clients == 0 || a.puts == 0 || a.keys == 0 || a.txn_ops == 0
    {
        return Err("--endpoints, --clients, --puts, --keys and --txn-ops must not be empty or 0".into());
    }
    if a.conns == Some(0) {
        return Err("--conns must be at least 1".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("etcd-load: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("etcd-load: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let conns = args.conns.unwrap_or(args.endpoints.len() as u64);
    let mut clients = Vec::new();
    for c in 0..conns {
        let ep = &args.endpoints[(c as usize) % args.endpoints.len()];
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(30));
        let client = Client::connect([ep.as_str()], Some(opts))
            .await
            .map_err(|e| format!("connect {ep}: {e}"))?;
        clients.push(client);
    }
    let value = vec![b'x'; args.value_size];

    // Warm up each connection (HTTP/2 set-up, etcd's first-request paths).
    for (c, client) in clients.iter().enumerate() {
        let mut kv = client.kv_client();
        for i in 0..args.warmup {
            kv.put(format!("warmup/{c}/{i}"), value.clone(), None)
                .await
                .map_err(|e| format!("warm-up put: {e}"))?;
        }
    }

    let requests_total = args.puts.div_ceil(args.txn_ops);
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + d);
    let mut tasks = Vec::new();
    for c in 0..args.clients {
        let mut kv = clients[(c as usize) % clients.len()].kv_client();
        let next = Arc::clone(&next);
        let errors = Arc::clone(&errors);
        let value = value.clone();
        let (keys, txn_ops) = (args.keys, args.txn_ops);
        tasks.push(tokio::spawn(async move {
            let mut lat_us: Vec<u32> = Vec::new();
            let mut done: u64 = 0;
            let mut last_error = None;
            loop {
                let r = next.fetch_add(1, Ordering::Relaxed);
                if let Some(d) = deadline {
                    if Instant::now() >= d {
                        break;
                    }
                } else if r >= requests_total {
                    break;
                }
                let t = Instant::now();
                let result = if txn_ops == 1 {
                    kv.put(format!("bench/{:08}", r % keys), value.clone(), None)
                        .await
                        .map(|_| ())
                } else {
                    let ops: Vec<TxnOp> = (0..txn_ops)
                        .map(|j| {
                            TxnOp::put(
                                format!("bench/{:08}", (r * txn_ops + j) % keys),
                                value.clone(),
                                None,
                            )
                        })
                        .collect();
                    kv.txn(Txn::new().and_then(ops)).await.map(|_| ())
                };
                match result {
                    Ok(()) => {
                        lat_us.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        done += txn_ops;
                    }
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        last_error = Some(e.to_string());
                    }
                }
            }
            (lat_us, done, last_error)
        }));
    }
    let mut lat: Vec<u32> = Vec::new();
    let mut puts = 0u64;
    let mut last_error = None;
    for t in tasks {
        let (l, d, e) = t.await.map_err(|e| e.to_string())?;
        lat.extend(l);
        puts += d;
        if e.is_some() {
            last_error = e;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let errors = errors.load(Ordering::Relaxed);
    if lat.is_empty() {
        return Err(format!(
            "no put succeeded ({errors} errors; last: {})",
            last_error.unwrap_or_default()
        ));
    }
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize] as f64 / 1000.0;
    let puts_per_s = puts as f64 / seconds;
    println!(
        "etcd put load: {} endpoints, {} connections, {} clients (closed loop), {} put(s) per request, {}-byte values, {} keys",
        args.endpoints.len(),
        conns,
        args.clients,
        args.txn_ops,
        args.value_size,
        args.keys
    );
    println!(
        "puts            {puts} in {seconds:.2} s ({} requests, {errors} errors)",
        lat.len()
    );
    if let Some(e) = &last_error {
        println!("last error      {e}");
    }
    println!("puts/s          {puts_per_s:.0}");
    println!(
        "latency ms      p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(0.999),
        pct(1.0)
    );
    println!(
        "puts_per_s={puts_per_s:.1} p50_ms={:.3} p90_ms={:.3} p99_ms={:.3} p999_ms={:.3} max_ms={:.3} puts={puts} requests={} errors={errors} seconds={seconds:.3} clients={} txn_ops={}",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(0.999),
        pct(1.0),
        lat.len(),
        args.clients,
        args.txn_ops
    );
    Ok(())
}

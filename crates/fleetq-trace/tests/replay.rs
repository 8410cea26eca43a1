//! Replays on small synthetic fleets and streams, where what each policy
//! does can be worked out by hand.

use std::io::Write;

use fleetq_trace::arrivals::{Order, Stream};
use fleetq_trace::baselines::Policy;
use fleetq_trace::clusters::{Fleet, Room};
use fleetq_trace::fleetq::{self, Mode};
use fleetq_trace::parse::NodeRow;
use fleetq_trace::replay::{self, Outcome, Point, Replay};
use fleetq_trace::workloads::Task;
use fleetq_trace::{compare, run_file, Options};

use Outcome::{Placed, Refused, Unplaceable};

fn node(sn: &str, gpus: u32, model: &str) -> NodeRow {
    NodeRow {
        sn: sn.into(),
        cpu_milli: 64_000,
        memory_mib: 262_144,
        gpus,
        model: model.into(),
    }
}

fn task(name: &str, gpus: u64) -> Task {
    Task {
        name: name.into(),
        need: Room {
            gpus,
            cpu_milli: 1_000,
            memory_mib: 1_024,
        },
        models: Vec::new(),
        shared: false,
    }
}

fn stream(tasks: Vec<Task>) -> Stream {
    Stream {
        from_trace: tasks.len(),
        tasks,
    }
}

/// One cluster of nodes a (8 GPUs), b (2), c (1): 11 GPUs. Tasks of 4, 2,
/// 4, 1, 2 and 1 GPUs.
fn three_nodes() -> (Fleet, Stream) {
    let fleet = Fleet::split(
        &[node("a", 8, "M"), node("b", 2, "M"), node("c", 1, "M")],
        1,
    )
    .expect("fleet");
    let gpus = [4, 2, 4, 1, 2, 1];
    let tasks = gpus
        .iter()
        .enumerate()
        .map(|(i, &g)| task(&format!("t{}", i + 1), g))
        .collect();
    (fleet, stream(tasks))
}

fn point(placed: u64) -> Option<Point> {
    Some(Point {
        placed,
        admitted: placed,
    })
}

#[test]
fn best_fit_by_hand() {
    let (fleet, s) = three_nodes();
    let r = replay::baseline(&fleet, &s, Policy::BestFit, 1);
    // t1 -> a (only a holds 4), t2 -> b (0 left), t3 -> a (0 left),
    // t4 -> c; then every node is full.
    assert_eq!(
        r.outcomes,
        [Placed, Placed, Placed, Placed, Refused, Refused]
    );
    let m = replay::measure(&r, &s, 11);
    assert_eq!(m.first_failure, point(11));
    // Demand reaches 11 GPUs (100%) with t4; 130% (14.3) is never reached.
    assert_eq!(m.at_100, point(11));
    assert_eq!(m.at_130, None);
    assert_eq!(m.unplaceable, 0);
}

#[test]
fn gpu_packing_by_hand() {
    let (fleet, s) = three_nodes();
    let r = replay::baseline(&fleet, &s, Policy::GpuPacking, 1);
    // t1 -> a; t2 -> a (already in use, though b would be left empty);
    // t3 (4) finds a and b with 2 free each and fails; t4 -> a (in use);
    // t5 -> b; t6 -> a. 10 GPUs, c left idle.
    assert_eq!(
        r.outcomes,
        [Placed, Placed, Refused, Placed, Placed, Placed]
    );
    let m = replay::measure(&r, &s, 11);
    assert_eq!(m.first_failure, point(6));
    assert_eq!(m.at_100, point(7));
}

#[test]
fn random_fit_places_only_where_room_is_and_repeats_with_its_seed() {
    let (fleet, s) = three_nodes();
    let r = replay::baseline(&fleet, &s, Policy::RandomFit, 5);
    // t1 fits only on a.
    assert_eq!(r.outcomes[0], Placed);
    assert!(!r.outcomes.contains(&Unplaceable));
    let placed: u64 = placed_gpus(&r, &s);
    assert!((9..=11).contains(&placed), "{placed}");
    assert_eq!(
        r.outcomes,
        replay::baseline(&fleet, &s, Policy::RandomFit, 5).outcomes
    );
}

#[test]
fn fleetq_places_like_best_fit_here() {
    let (fleet, s) = three_nodes();
    let r = fleetq::replay(&fleet, &s, Mode::Nodes, 4).expect("replay");
    // fleetq puts a pod on the node where the fewest such pods fit: the
    // same choices as Best-fit on this input.
    assert_eq!(
        r.outcomes,
        [Placed, Placed, Placed, Placed, Refused, Refused]
    );
    assert_eq!(r.admissions, 4);
    let m = replay::measure(&r, &s, 11);
    assert_eq!((m.first_failure, m.unplaceable), (point(11), 0));
}

#[test]
fn a_bag_of_gpus_admits_what_no_node_holds() {
    // Two 4-GPU nodes: 8 GPUs in total, but no node holds 8.
    let fleet = Fleet::split(&[node("a", 4, "M"), node("b", 4, "M")], 1).expect("fleet");
    let s = stream(vec![task("big", 8)]);
    let bag = fleetq::replay(&fleet, &s, Mode::Bag, 10).expect("bag");
    assert_eq!(bag.outcomes, [Unplaceable]);
    let m = replay::measure(&bag, &s, 8);
    assert_eq!(m.unplaceable, 1);
    assert_eq!(
        m.at_100,
        Some(Point {
            placed: 0,
            admitted: 8
        })
    );
    let nodes = fleetq::replay(&fleet, &s, Mode::Nodes, 10).expect("nodes");
    assert_eq!(nodes.outcomes, [Refused]);
    assert_eq!(replay::measure(&nodes, &s, 8).unplaceable, 0);
}

/// A deterministic mix: 48 nodes of three models and four sizes in three
/// clusters, 400 tasks of 1-8 GPUs, some restricted to models, some
/// heavy on CPU or memory.
fn mixed() -> (Fleet, Stream) {
    let models = ["A10", "T4", "V100M32"];
    let sizes = [1, 2, 4, 8];
    let rows: Vec<NodeRow> = (0..48)
        .map(|i| NodeRow {
            cpu_milli: [32_000, 64_000, 96_000][i % 3],
            memory_mib: [131_072, 262_144][i % 2],
            ..node(&format!("n{i:02}"), sizes[i % 4], models[(i / 4) % 3])
        })
        .collect();
    let fleet = Fleet::split(&rows, 3).expect("fleet");
    let mut x: u64 = 12345;
    let mut next = move |m: u64| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (x >> 33) % m
    };
    let tasks = (0..400)
        .map(|i| {
            let gpus = [1, 1, 1, 2, 4, 8][next(6) as usize];
            let mut t = task(&format!("t{i}"), gpus);
            t.need.cpu_milli = [1_000, 8_000, 30_000][next(3) as usize];
            t.need.memory_mib = [1_024, 65_536][next(2) as usize];
            t.models = match next(4) {
                0 => vec!["T4".into()],
                1 => vec!["A10".into(), "V100M32".into()],
                _ => Vec::new(),
            };
            t
        })
        .collect();
    (fleet, stream(tasks))
}

fn placed_gpus(r: &Replay, s: &Stream) -> u64 {
    s.tasks
        .iter()
        .zip(&r.outcomes)
        .filter(|(_, o)| **o == Placed)
        .map(|(t, _)| t.need.gpus)
        .sum()
}

#[test]
fn fleetq_never_admits_what_its_node_cannot_hold() {
    let (fleet, s) = mixed();
    let one_by_one = fleetq::replay(&fleet, &s, Mode::Nodes, 1).expect("replay");
    for batch in [1, 7, 400] {
        let r = fleetq::replay(&fleet, &s, Mode::Nodes, batch).expect("replay");
        assert_eq!(r.outcomes.len(), s.tasks.len());
        let m = replay::measure(&r, &s, fleet.total_gpus());
        assert_eq!(m.unplaceable, 0, "batch {batch}: {:?}", r.notes);
        assert!(m.refused > 0, "the mix overfills the fleet");
        // Batches keep arrival order: the same admissions as one by one.
        assert_eq!(r.outcomes, one_by_one.outcomes, "batch {batch}");
    }
}

#[test]
fn every_policy_runs_on_the_same_stream() {
    let (fleet, s) = mixed();
    let opts = Options {
        seed: 3,
        batch: 50,
        order: Order::Trace,
    };
    let results = compare(&fleet, &s, &opts).expect("compare");
    let names: Vec<&str> = results.iter().map(|(r, _)| r.policy.as_str()).collect();
    assert_eq!(
        names,
        [
            "fleetq (nodes)",
            "fleetq, bag of GPUs (totals only)",
            "Random-fit",
            "Best-fit",
            "GPU packing"
        ]
    );
    for (r, m) in &results {
        assert_eq!(r.outcomes.len(), s.tasks.len(), "{}", r.policy);
        if r.policy != "fleetq, bag of GPUs (totals only)" {
            assert_eq!(m.unplaceable, 0, "{}", r.policy);
        }
    }
}

#[test]
fn a_whole_file_renders_one_table() {
    let mut tasks = tempfile::NamedTempFile::new().expect("temp");
    let mut csv = String::from(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n",
    );
    for i in 0..30 {
        let (gpus, milli) = [(1, 460), (1, 1000), (2, 1000), (0, 0), (8, 1000)][i % 5];
        csv.push_str(&format!(
            "p{i},4000,8192,{gpus},{milli},,LS,Running,{i},{i},{i}\n"
        ));
    }
    tasks.write_all(csv.as_bytes()).expect("write");
    let rows: Vec<NodeRow> = (0..6).map(|i| node(&format!("n{i}"), 4, "G2")).collect();
    let fleet = Fleet::split(&rows, 2).expect("fleet");
    let opts = Options {
        seed: 1,
        batch: 8,
        order: Order::Trace,
    };
    let out = run_file(&fleet, tasks.path(), "synthetic", &opts).expect("run");
    assert!(
        out.contains("30 tasks: 6 CPU-only left out, 24 GPU tasks (6 GPU shares"),
        "{out}"
    );
    assert!(
        out.contains("| policy | allocated at first failure %"),
        "{out}"
    );
    // Header and six rows: fleetq with nodes, with one flavor, as a bag,
    // and the three baselines.
    assert_eq!(out.matches("\n| ").count(), 7, "{out}");
    assert!(
        out.contains("| fleetq (nodes), all models one flavor |"),
        "{out}"
    );
}

/// A flavor whose totals have room but whose nodes cannot take the pod
/// is passed over for the next one (this replay found fleetq waiting
/// instead, and stopping at 72% of the fleet's GPUs).
#[test]
fn a_flavor_whose_nodes_are_full_is_passed_over() {
    let rows = [
        node("a0", 4, "A"),
        node("a1", 4, "A"),
        NodeRow {
            cpu_milli: 64_000,
            ..node("b0", 8, "B")
        },
    ];
    let fleet = Fleet::split(&rows, 1).expect("fleet");
    let mut cpu_heavy = task("t1", 1);
    cpu_heavy.need.cpu_milli = 64_000;
    let s = stream(vec![cpu_heavy, task("t2", 4), task("t3", 2)]);
    // t1 takes all of a0's CPU, t2 all of a1's GPUs: flavor a still has
    // 3 GPUs and 63 CPUs in total, but no node of it holds t3.
    let nodes = fleetq::replay(&fleet, &s, Mode::Nodes, 10).expect("nodes");
    assert_eq!(nodes.outcomes, [Placed, Placed, Placed]);
    // With one flavor node placement finds b0; so does Best-fit.
    let one = fleetq::replay(&fleet, &s, Mode::OneFlavor, 10).expect("one flavor");
    assert_eq!(one.outcomes, [Placed, Placed, Placed]);
    let best = replay::baseline(&fleet, &s, Policy::BestFit, 1);
    assert_eq!(best.outcomes, [Placed, Placed, Placed]);
}

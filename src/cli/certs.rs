//! `fleetq certs`: a development certificate authority and the
//! certificates of mutual TLS, plus bearer tokens for clients without one.
//!
//! ```text
//! fleetq certs init  --dir certs                       # ca.pem, ca-key.pem
//! fleetq certs issue --dir certs node --id 1 --host 10.0.0.5
//! fleetq certs issue --dir certs agent --cluster gpu-east
//! fleetq certs issue --dir certs client --tenant team-a
//! fleetq certs token                                   # token + sha256 line
//! ```
//!
//! Every certificate names one identity as a URI SAN
//! ([`Identity::uri`]); node certificates also carry the addresses and DNS
//! names the node answers on. Files are `ca.pem`, `STEM.pem` and
//! `STEM-key.pem` in one directory, the layout
//! [`fleetq_proto::tls::TlsFiles::in_dir`] reads. Private keys are mode
//! 0600 and never printed; every file is written to a temporary file in the
//! same directory and renamed into place, so a process reloading its
//! certificates never reads half a file.
//!
//! [`ensure_dev_certs`] is the same for `fleetq dev`: it creates whatever
//! is missing and reuses what is there, and two processes may run it on the
//! same directory at once.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use fleetq_proto::tls::Identity;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use sha2::{Digest, Sha256};
use x509_parser::time::ASN1Time;

const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca-key.pem";
const CA_COMMON_NAME: &str = "fleetq dev CA";
/// Validity of what [`ensure_dev_certs`] creates, CA and leaves alike: a
/// development directory should not stop working after a year.
const DEV_DAYS: u32 = 3650;
/// Certificates start this long before now, for peers whose clocks run
/// behind this one.
const CLOCK_SKEW: u64 = 3600;
/// The longest `--days` accepted (100 years).
const MAX_DAYS: i64 = 36_500;
/// How long [`ensure_dev_certs`] waits for another process to finish a key
/// and certificate it has started writing.
const PEER_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Args)]
pub struct CertsArgs {
    #[command(subcommand)]
    command: CertsCommand,
}

#[derive(Debug, Subcommand)]
enum CertsCommand {
    /// Create a certificate authority: DIR/ca.pem (give it to every fleetq
    /// process) and DIR/ca-key.pem (keep it private: it signs certificates).
    Init(InitArgs),
    /// Issue a node, agent or client certificate signed by the CA in DIR:
    /// DIR/STEM.pem and DIR/STEM-key.pem, replacing them if they exist
    /// (running processes pick up replaced files without a restart).
    Issue(IssueArgs),
    /// Print a new random bearer token, and on a second line its
    /// `sha256:HEX` digest, the form an authorization policy file stores.
    Token,
}

#[derive(Debug, Args)]
struct InitArgs {
    /// Directory for ca.pem and ca-key.pem; created (mode 0700) if missing.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Days the CA certificate is valid.
    #[arg(long, value_name = "N", default_value_t = 3650, value_parser = clap::value_parser!(u32).range(1..=MAX_DAYS))]
    days: u32,
    /// Replace an existing CA. Certificates the old one signed stop being
    /// trusted wherever the new ca.pem is installed.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct IssueArgs {
    /// Directory holding ca.pem and ca-key.pem; the certificate and its key
    /// are written there.
    #[arg(long, value_name = "DIR", global = true)]
    dir: Option<PathBuf>,
    /// Days the certificate is valid (never past the CA's own end).
    #[arg(long, value_name = "N", default_value_t = 365, global = true, value_parser = clap::value_parser!(u32).range(1..=MAX_DAYS))]
    days: u32,
    /// Write STEM.pem and STEM-key.pem instead of node-N, agent-NAME or
    /// client-NAME.
    #[arg(long, value_name = "STEM", global = true)]
    name: Option<String>,
    #[command(subcommand)]
    kind: IssueKind,
}

#[derive(Debug, Subcommand)]
enum IssueKind {
    /// A control-plane node (a server, and a client of its peers):
    /// spiffe://fleetq/node/N, plus each --host.
    Node {
        /// The node's Raft id.
        #[arg(long, value_name = "N")]
        id: u64,
        /// An IP address or DNS name the node answers on; repeatable.
        /// Default: 127.0.0.1, ::1 and localhost.
        #[arg(long = "host", value_name = "H")]
        hosts: Vec<String>,
    },
    /// The agent of a member cluster: spiffe://fleetq/agent/NAME.
    Agent {
        /// The cluster's name.
        #[arg(long, value_name = "NAME")]
        cluster: String,
    },
    /// A client acting for a tenant: spiffe://fleetq/tenant/NAME.
    Client {
        /// The tenant's name, as the authorization policy lists it.
        #[arg(long, value_name = "NAME")]
        tenant: String,
    },
}

pub fn run(args: &CertsArgs) -> ExitCode {
    let result = match &args.command {
        CertsCommand::Init(a) => init(a),
        CertsCommand::Issue(a) => issue(a),
        CertsCommand::Token => token(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init(args: &InitArgs) -> Result<(), String> {
    let dir = &args.dir;
    create_dir(dir)?;
    let cert = dir.join(CA_CERT);
    let key = dir.join(CA_KEY);
    let refuse = |path: &Path| {
        format!(
            "{} exists: this directory already has a CA (--force replaces it, and \
             certificates the old one signed stop being trusted)",
            path.display()
        )
    };
    if !args.force {
        for path in [&cert, &key] {
            if exists(path)? {
                return Err(refuse(path));
            }
        }
    }
    let (cert_pem, key_pem) = new_ca(args.days)?;
    if !publish(&cert, &cert_pem, &key, &key_pem, args.force)? {
        return Err(refuse(&key));
    }
    println!(
        "wrote {} (give it to every fleetq process) and {} (private: it signs certificates), valid {} days",
        cert.display(),
        key.display(),
        args.days
    );
    Ok(())
}

fn issue(args: &IssueArgs) -> Result<(), String> {
    let dir = args
        .dir
        .as_deref()
        .ok_or("--dir DIR is required: the directory holding ca.pem and ca-key.pem")?;
    let (identity, flag, default_stem, hosts) = match &args.kind {
        IssueKind::Node { id, hosts } => {
            let hosts = if hosts.is_empty() {
                default_hosts()
            } else {
                hosts.clone()
            };
            (Identity::Node(*id), "--id", format!("node-{id}"), hosts)
        }
        IssueKind::Agent { cluster } => (
            Identity::Agent(cluster.clone()),
            "--cluster",
            format!("agent-{cluster}"),
            Vec::new(),
        ),
        IssueKind::Client { tenant } => (
            Identity::Tenant(tenant.clone()),
            "--tenant",
            format!("client-{tenant}"),
            Vec::new(),
        ),
    };
    check_identity(&identity).map_err(|e| format!("{flag}: {e}"))?;
    let sans = host_sans(&hosts)?;
    let stem = match &args.name {
        Some(stem) => {
            check_stem(stem).map_err(|e| format!("--name: {e}"))?;
            stem.clone()
        }
        None => default_stem,
    };
    let ca = load_ca(dir)?;
    let (cert_pem, key_pem) = new_leaf(&ca, &identity, &sans, args.days)?;
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}-key.pem"));
    publish(&cert, &cert_pem, &key, &key_pem, true)?;
    println!(
        "wrote {} and {}: {} ({}), valid {} days",
        cert.display(),
        key.display(),
        identity,
        identity.uri(),
        args.days
    );
    Ok(())
}

fn token() -> Result<(), String> {
    let (token, digest) = new_token()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{token}\n{digest}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing to stdout: {e}"))?;
    eprintln!(
        "give the token (first line) to the client (FLEETQ_TOKEN); put the sha256 line in the \
         tenant's tokens: list in the authorization policy file"
    );
    Ok(())
}

/// A new bearer token (32 random bytes, hex) and `sha256:HEX` of its text.
fn new_token() -> Result<(String, String), String> {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| format!("the system random number generator failed: {e}"))?;
    let token = hex(&bytes);
    let digest = format!("sha256:{}", hex(&Sha256::digest(token.as_bytes())));
    Ok((token, digest))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates the directory `fleetq dev` keeps its TLS material in, and in it
/// whatever is missing of: a CA (`ca.pem`, `ca-key.pem`), `node-N` for each
/// node (for 127.0.0.1, ::1 and localhost), `agent-C` for each cluster, and
/// `client` for the tenant `tenant_admin`. Existing files are reused, never
/// overwritten. Two processes may call this on the same directory at once:
/// one writes each pair and the other uses it.
pub fn ensure_dev_certs(
    dir: &Path,
    nodes: &[u64],
    clusters: &[String],
    tenant_admin: &str,
) -> Result<(), String> {
    let mut leaves = Vec::new();
    for &id in nodes {
        leaves.push((format!("node-{id}"), Identity::Node(id), default_hosts()));
    }
    for cluster in clusters {
        leaves.push((
            format!("agent-{cluster}"),
            Identity::Agent(cluster.clone()),
            Vec::new(),
        ));
    }
    leaves.push((
        "client".to_string(),
        Identity::Tenant(tenant_admin.to_string()),
        Vec::new(),
    ));
    let mut planned = Vec::new();
    for (stem, identity, hosts) in leaves {
        check_identity(&identity)?;
        let sans = host_sans(&hosts)?;
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}-key.pem"));
        planned.push((cert, key, identity, sans));
    }

    create_dir(dir)?;
    ensure_pair(&dir.join(CA_CERT), &dir.join(CA_KEY), false, || {
        new_ca(DEV_DAYS)
    })?;

    let mut ca = None;
    if let Some((missing, _, _, _)) = planned.iter().find(|(cert, ..)| !cert.exists()) {
        let ca_key = dir.join(CA_KEY);
        if !exists(&ca_key)? {
            return Err(format!(
                "{} is missing, so {} cannot be issued (the CA's key signs it): put the key \
                 back, or use an empty directory for a new CA",
                ca_key.display(),
                missing.display()
            ));
        }
        ca = Some(load_ca(dir)?);
    }
    for (cert, key, identity, sans) in &planned {
        ensure_pair(cert, key, true, || {
            let ca = ca
                .as_ref()
                .ok_or_else(|| format!("{} disappeared while it was checked", cert.display()))?;
            new_leaf(ca, identity, sans, DEV_DAYS)
        })?;
    }
    Ok(())
}

/// Makes sure `cert` (and, with `key_required`, `key`) exist: reuses them
/// if they do, otherwise writes what `make` returns unless another process
/// got there first, and then uses that process's pair.
fn ensure_pair(
    cert: &Path,
    key: &Path,
    key_required: bool,
    make: impl FnOnce() -> Result<(String, String), String>,
) -> Result<(), String> {
    // The key is written first, so an existing certificate means a
    // complete pair.
    if exists(cert)? {
        if key_required && !exists(key)? {
            return Err(format!(
                "{} exists without its key {}: remove the certificate to have both issued again",
                cert.display(),
                key.display()
            ));
        }
        return Ok(());
    }
    if !exists(key)? {
        let (cert_pem, key_pem) = make()?;
        if publish(cert, &cert_pem, key, &key_pem, false)? {
            return Ok(());
        }
    }
    // Another process wrote the key and is about to write the certificate.
    let start = Instant::now();
    while start.elapsed() < PEER_WAIT {
        if exists(cert)? {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{} exists without {} (another fleetq is writing them, or one was interrupted): \
         remove the key to have both issued again",
        key.display(),
        cert.display()
    ))
}

/// The default addresses of a node certificate.
fn default_hosts() -> Vec<String> {
    ["127.0.0.1", "::1", "localhost"]
        .into_iter()
        .map(String::from)
        .collect()
}

/// The error `Identity::parse_uri` gives for a name no fleetq identity may
/// carry (a cluster or tenant name with capitals or a slash, node id 0).
fn check_identity(identity: &Identity) -> Result<(), String> {
    Identity::parse_uri(&identity.uri()).map(|_| ())
}

/// IP address SANs for hosts that parse as one, DNS name SANs for the
/// others; duplicates dropped.
fn host_sans(hosts: &[String]) -> Result<Vec<SanType>, String> {
    let mut sans = Vec::new();
    for host in hosts {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let san = match bare.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) if valid_dns_name(host) => SanType::DnsName(
                host.to_ascii_lowercase()
                    .try_into()
                    .map_err(|e| format!("--host {host:?}: {e}"))?,
            ),
            Err(_) => {
                return Err(format!(
                    "--host {host:?}: neither an IP address nor a DNS name"
                ))
            }
        };
        if !sans.contains(&san) {
            sans.push(san);
        }
    }
    Ok(sans)
}

/// Letters, digits and '-' in dot-separated labels of 1-63 characters, the
/// first label possibly `*`.
fn valid_dns_name(name: &str) -> bool {
    let name = name.strip_prefix("*.").unwrap_or(name);
    (1..=253).contains(&name.len())
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A file-name stem for `--name`: no directories, no hidden files, and not
/// the CA's own files.
fn check_stem(stem: &str) -> Result<(), String> {
    if stem.is_empty()
        || stem.starts_with('.')
        || !stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        return Err(format!(
            "{stem:?}: a file name stem is letters, digits, '-', '.' or '_', not starting with '.'"
        ));
    }
    if stem == "ca" {
        return Err("\"ca\" would overwrite the CA's own files".to_string());
    }
    Ok(())
}

/// A CA loaded for signing.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    not_after: ASN1Time,
}

fn load_ca(dir: &Path) -> Result<Ca, String> {
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let cert_pem = read(&cert_path)?;
    let key_pem = read(&key_path)?;
    let not_a_cert =
        |e: &dyn std::fmt::Display| format!("{}: not a PEM certificate: {e}", cert_path.display());
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).map_err(|e| not_a_cert(&e))?;
    let x509 = pem.parse_x509().map_err(|e| not_a_cert(&e))?;
    if !x509.is_ca() {
        return Err(format!(
            "{}: not a CA certificate (no basicConstraints CA:true)",
            cert_path.display()
        ));
    }
    let not_after = x509.validity().not_after;
    if not_after.timestamp() <= now()? {
        return Err(format!(
            "{}: the CA expired on {not_after} (fleetq certs init --force makes a new one)",
            cert_path.display()
        ));
    }
    let key = KeyPair::from_pem(&key_pem)
        .map_err(|e| format!("{}: not a PEM private key: {e}", key_path.display()))?;
    if x509.public_key().raw != key.subject_public_key_info().as_slice() {
        return Err(format!(
            "{} is not the key of {}",
            key_path.display(),
            cert_path.display()
        ));
    }
    let issuer = Issuer::from_ca_cert_pem(&cert_pem, key)
        .map_err(|e| format!("{}: unusable CA certificate: {e}", cert_path.display()))?;
    Ok(Ca { issuer, not_after })
}

fn new_key() -> Result<KeyPair, String> {
    KeyPair::generate().map_err(|e| format!("cannot generate a key pair: {e}"))
}

/// A self-signed CA: (certificate PEM, private key PEM).
fn new_ca(days: u32) -> Result<(String, String), String> {
    let key = new_key()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, days, None)?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("cannot create the CA certificate: {e}"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A certificate for `identity` (plus `hosts` SANs) signed by `ca`:
/// (certificate PEM, private key PEM).
fn new_leaf(
    ca: &Ca,
    identity: &Identity,
    hosts: &[SanType],
    days: u32,
) -> Result<(String, String), String> {
    let key = new_key()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    // A common name is at most 64 characters; the URI SAN is what counts.
    let common_name: String = format!("fleetq {identity}").chars().take(64).collect();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    let uri = identity
        .uri()
        .try_into()
        .map_err(|e| format!("{identity}: {e}"))?;
    params.subject_alt_names = vec![SanType::URI(uri)];
    params.subject_alt_names.extend(hosts.iter().cloned());
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match identity {
        // Nodes serve clients, agents and peers, and connect to peers.
        Identity::Node(_) => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Identity::Agent(_) | Identity::Tenant(_) => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, days, Some(ca.not_after))?;
    let cert = params
        .signed_by(&key, &ca.issuer)
        .map_err(|e| format!("cannot sign the certificate of {identity}: {e}"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Seconds since the Unix epoch.
fn now() -> Result<i64, String> {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_secs()).ok())
        .ok_or_else(|| "the system clock is set before 1970".to_string())
}

/// Valid from a little before now for `days`, and never past `until`.
fn set_validity(
    params: &mut CertificateParams,
    days: u32,
    until: Option<ASN1Time>,
) -> Result<(), String> {
    let now = now()?;
    let start = now.saturating_sub(CLOCK_SKEW as i64);
    let mut end = now.saturating_add(i64::from(days).saturating_mul(86_400));
    if let Some(until) = until {
        end = end.min(until.timestamp());
    }
    let time = |secs: i64| {
        ASN1Time::from_timestamp(secs)
            .map(|t| t.to_datetime())
            .map_err(|_| format!("the validity period ({days} days from now) is out of range"))
    };
    params.not_before = time(start)?;
    params.not_after = time(end)?;
    Ok(())
}

/// Writes the key, then the certificate, each atomically. With `replace`
/// existing files are replaced; without, nothing is written and the result
/// is `false` when the key already exists.
fn publish(
    cert: &Path,
    cert_pem: &str,
    key: &Path,
    key_pem: &str,
    replace: bool,
) -> Result<bool, String> {
    if !write_atomic(key, key_pem, true, replace)? {
        return Ok(false);
    }
    if !write_atomic(cert, cert_pem, false, replace)? {
        // Not our certificate: do not leave a key beside it that is not its.
        let _ = std::fs::remove_file(key);
        return Err(format!(
            "{} appeared while {} was written; run again",
            cert.display(),
            key.display()
        ));
    }
    Ok(true)
}

/// Writes `contents` to a temporary file beside `path` (mode 0600 for a
/// private key, else 0644), then renames it into place: over an existing
/// file with `replace`, otherwise only if `path` does not exist (`false`
/// when it does).
fn write_atomic(path: &Path, contents: &str, private: bool, replace: bool) -> Result<bool, String> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut tmp = tempfile::Builder::new()
        .prefix(".fleetq-certs-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(cannot)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if private { 0o600 } else { 0o644 };
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(cannot)?;
    }
    #[cfg(not(unix))]
    let _ = private;
    tmp.write_all(contents.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(cannot)?;
    let persisted = if replace {
        tmp.persist(path)
    } else {
        tmp.persist_noclobber(path)
    };
    match persisted {
        Ok(_) => Ok(true),
        Err(e) if !replace && e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(cannot(e.error)),
    }
}

fn exists(path: &Path) -> Result<bool, String> {
    path.try_exists()
        .map_err(|e| format!("cannot check {}: {e}", path.display()))
}

/// Creates `dir` and its parents, mode 0700, unless it exists.
fn create_dir(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use fleetq_proto::tls::{Tls, TlsFiles};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};
    use std::sync::Arc;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        certs: CertsArgs,
    }

    fn parse(args: &[&str]) -> CertsCommand {
        Cli::try_parse_from(std::iter::once("certs").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .certs
            .command
    }

    fn init_in(dir: &Path, force: bool) -> Result<(), String> {
        init(&InitArgs {
            dir: dir.to_path_buf(),
            days: 3650,
            force,
        })
    }

    fn issue_in(dir: &Path, name: Option<&str>, kind: IssueKind) -> Result<(), String> {
        issue(&IssueArgs {
            dir: Some(dir.to_path_buf()),
            days: 365,
            name: name.map(String::from),
            kind,
        })
    }

    fn leaf(dir: &Path, stem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(dir.join(format!("{stem}.pem"))).expect("leaf certificate")
    }

    fn identity_of(dir: &Path, stem: &str) -> Identity {
        Tls::load(TlsFiles::in_dir(dir, stem)).unwrap_or_else(|e| panic!("{stem}: {e}"));
        Identity::of_certificate(&leaf(dir, stem)).expect("identity")
    }

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    /// Checks the leaf's signature with the CA's key.
    fn signed_by_ca(dir: &Path, stem: &str) -> bool {
        let ca = CertificateDer::from_pem_file(dir.join(CA_CERT)).expect("ca");
        let leaf = leaf(dir, stem);
        let (_, ca) = x509_parser::parse_x509_certificate(&ca).expect("ca parses");
        let (_, leaf) = x509_parser::parse_x509_certificate(&leaf).expect("leaf parses");
        leaf.verify_signature(Some(ca.public_key())).is_ok()
    }

    /// A TLS handshake in memory: `client` connects to `server` as
    /// `server_name`; returns who the server sees, or the handshake error.
    fn handshake(server: &Tls, client: &Tls, server_name: &str) -> Result<Identity, String> {
        let server_config = server.server_config().expect("server has a certificate");
        let mut s = rustls::ServerConnection::new(server_config).map_err(|e| e.to_string())?;
        let name = ServerName::try_from(server_name.to_string()).expect("server name");
        let mut c = rustls::ClientConnection::new(client.client_config(), name)
            .map_err(|e| e.to_string())?;
        for _ in 0..20 {
            if !c.is_handshaking() && !s.is_handshaking() {
                break;
            }
            let mut buf = Vec::new();
            c.write_tls(&mut buf).map_err(|e| e.to_string())?;
            s.read_tls(&mut buf.as_slice()).map_err(|e| e.to_string())?;
            s.process_new_packets()
                .map_err(|e| format!("server: {e}"))?;
            let mut buf = Vec::new();
            s.write_tls(&mut buf).map_err(|e| e.to_string())?;
            c.read_tls(&mut buf.as_slice()).map_err(|e| e.to_string())?;
            c.process_new_packets()
                .map_err(|e| format!("client: {e}"))?;
        }
        let peer = s
            .peer_certificates()
            .and_then(|certs| certs.first())
            .ok_or("the client presented no certificate")?;
        Identity::of_certificate(peer)
    }

    #[test]
    fn init_then_issue_node_agent_and_client() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        init_in(dir, false).expect("init");
        assert_eq!(mode(&dir.join(CA_KEY)), 0o600);
        assert_eq!(mode(&dir.join(CA_CERT)), 0o644);
        issue_in(
            dir,
            None,
            IssueKind::Node {
                id: 3,
                hosts: Vec::new(),
            },
        )
        .expect("node");
        issue_in(
            dir,
            None,
            IssueKind::Agent {
                cluster: "gpu-east".into(),
            },
        )
        .expect("agent");
        issue_in(
            dir,
            None,
            IssueKind::Client {
                tenant: "team-a".into(),
            },
        )
        .expect("client");
        issue_in(
            dir,
            Some("edge"),
            IssueKind::Node {
                id: 4,
                hosts: vec!["10.1.2.3".into(), "node4.example".into()],
            },
        )
        .expect("node with --name and hosts");

        assert_eq!(identity_of(dir, "node-3"), Identity::Node(3));
        assert_eq!(
            identity_of(dir, "agent-gpu-east"),
            Identity::Agent("gpu-east".into())
        );
        assert_eq!(
            identity_of(dir, "client-team-a"),
            Identity::Tenant("team-a".into())
        );
        assert_eq!(identity_of(dir, "edge"), Identity::Node(4));
        for stem in ["node-3", "agent-gpu-east", "client-team-a", "edge"] {
            assert_eq!(mode(&dir.join(format!("{stem}-key.pem"))), 0o600, "{stem}");
            assert!(signed_by_ca(dir, stem), "{stem}");
        }

        // The certificates work for mutual TLS: the node serves its
        // default hosts and --host names, and sees who connects.
        let tls = |stem: &str| Tls::load(TlsFiles::in_dir(dir, stem)).expect(stem);
        let node = tls("node-3");
        for host in ["127.0.0.1", "::1", "localhost"] {
            assert_eq!(
                handshake(&node, &tls("agent-gpu-east"), host),
                Ok(Identity::Agent("gpu-east".into())),
                "{host}"
            );
        }
        assert_eq!(
            handshake(&node, &tls("client-team-a"), "localhost"),
            Ok(Identity::Tenant("team-a".into()))
        );
        let edge = tls("edge");
        assert_eq!(
            handshake(&edge, &node, "node4.example"),
            Ok(Identity::Node(3))
        );
        assert_eq!(handshake(&edge, &node, "10.1.2.3"), Ok(Identity::Node(3)));
        let err = handshake(&edge, &node, "localhost").expect_err("edge is not localhost");
        assert!(err.contains("not valid for name \"localhost\""), "{err}");
        // A client-only certificate cannot serve.
        let err = handshake(&tls("client-team-a"), &node, "localhost").expect_err("no serverAuth");
        assert!(
            err.contains("extended key usage for server authentication"),
            "{err}"
        );
    }

    #[test]
    fn init_refuses_to_overwrite_without_force() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        init_in(dir, false).expect("init");
        let before = std::fs::read(dir.join(CA_CERT)).expect("ca");
        let err = init_in(dir, false).expect_err("second init");
        assert!(
            err.contains("ca.pem exists") && err.contains("--force"),
            "{err}"
        );
        assert_eq!(std::fs::read(dir.join(CA_CERT)).expect("ca"), before);

        // Only the key left: still refused.
        std::fs::remove_file(dir.join(CA_CERT)).expect("rm");
        let err = init_in(dir, false).expect_err("key exists");
        assert!(err.contains("ca-key.pem exists"), "{err}");

        init_in(dir, true).expect("--force");
        assert_ne!(std::fs::read(dir.join(CA_CERT)).expect("ca"), before);
        assert_eq!(mode(&dir.join(CA_KEY)), 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .filter(|n| n.to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }

    #[test]
    fn bad_names_are_refused_naming_the_flag() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        init_in(dir, false).expect("init");
        let err = issue_in(
            dir,
            None,
            IssueKind::Agent {
                cluster: "GPU/East".into(),
            },
        )
        .expect_err("bad cluster");
        assert!(err.starts_with("--cluster: "), "{err}");
        let err = issue_in(
            dir,
            None,
            IssueKind::Client {
                tenant: String::new(),
            },
        )
        .expect_err("empty tenant");
        assert!(err.starts_with("--tenant: "), "{err}");
        let err = issue_in(
            dir,
            None,
            IssueKind::Node {
                id: 0,
                hosts: Vec::new(),
            },
        )
        .expect_err("node 0");
        assert!(err.starts_with("--id: "), "{err}");
        let err = issue_in(
            dir,
            None,
            IssueKind::Node {
                id: 1,
                hosts: vec!["bad host".into()],
            },
        )
        .expect_err("bad host");
        assert!(err.starts_with("--host \"bad host\""), "{err}");
        for stem in ["ca", "../x", ".hidden", ""] {
            let err = issue_in(
                dir,
                Some(stem),
                IssueKind::Node {
                    id: 1,
                    hosts: Vec::new(),
                },
            )
            .expect_err(stem);
            assert!(err.starts_with("--name: "), "{stem}: {err}");
        }
        // Nothing was written for the refused ones.
        let names: Vec<_> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn issue_without_a_ca_or_with_a_foreign_key_says_which_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        let node = || IssueKind::Node {
            id: 1,
            hosts: Vec::new(),
        };
        let err = issue_in(dir, None, node()).expect_err("no CA");
        assert!(err.contains("ca.pem"), "{err}");
        init_in(dir, false).expect("init");
        let other = tempfile::tempdir().expect("tempdir");
        init_in(other.path(), false).expect("other init");
        std::fs::copy(other.path().join(CA_KEY), dir.join(CA_KEY)).expect("copy");
        let err = issue_in(dir, None, node()).expect_err("foreign key");
        assert!(err.contains("is not the key of"), "{err}");
    }

    #[test]
    fn token_and_its_digest() {
        let (token, digest) = new_token().expect("token");
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            digest,
            format!("sha256:{}", hex(&Sha256::digest(token.as_bytes())))
        );
        assert_eq!(digest.len(), "sha256:".len() + 64);
        assert_ne!(new_token().expect("token").0, token);
        // The known vector the policy tests use.
        assert_eq!(
            hex(&Sha256::digest(b"hello")),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
    }

    #[test]
    fn command_line() {
        match parse(&["issue", "--dir", "d", "--days", "7", "node", "--id", "2"]) {
            CertsCommand::Issue(a) => {
                assert_eq!(a.dir.as_deref(), Some(Path::new("d")));
                assert_eq!(a.days, 7);
                assert!(matches!(a.kind, IssueKind::Node { id: 2, ref hosts } if hosts.is_empty()));
            }
            other => panic!("{other:?}"),
        }
        // The shared flags may also follow the kind.
        match parse(&[
            "issue",
            "agent",
            "--cluster",
            "east",
            "--dir",
            "d",
            "--name",
            "a",
        ]) {
            CertsCommand::Issue(a) => {
                assert_eq!(a.dir.as_deref(), Some(Path::new("d")));
                assert_eq!(a.days, 365);
                assert_eq!(a.name.as_deref(), Some("a"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["init", "--dir", "d"]) {
            CertsCommand::Init(a) => assert!(a.days == 3650 && !a.force),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&["token"]), CertsCommand::Token));
        assert!(Cli::try_parse_from(["certs", "init", "--dir", "d", "--days", "0"]).is_err());
        let err = issue(&IssueArgs {
            dir: None,
            days: 365,
            name: None,
            kind: IssueKind::Client { tenant: "a".into() },
        })
        .expect_err("no --dir");
        assert!(err.starts_with("--dir"), "{err}");
    }

    fn dev_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| {
                let e = e.expect("entry");
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).expect("read"),
                )
            })
            .collect();
        files.sort();
        files
    }

    fn check_dev_dir(dir: &Path) {
        assert_eq!(mode(dir), 0o700);
        let names: Vec<_> = dev_files(dir).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "agent-dev-east-key.pem",
                "agent-dev-east.pem",
                "agent-dev-west-key.pem",
                "agent-dev-west.pem",
                "ca-key.pem",
                "ca.pem",
                "client-key.pem",
                "client.pem",
                "node-1-key.pem",
                "node-1.pem",
                "node-2-key.pem",
                "node-2.pem",
            ]
        );
        for (stem, identity) in [
            ("node-1", Identity::Node(1)),
            ("node-2", Identity::Node(2)),
            ("agent-dev-east", Identity::Agent("dev-east".into())),
            ("agent-dev-west", Identity::Agent("dev-west".into())),
            ("client", Identity::Tenant("admin".into())),
        ] {
            assert_eq!(identity_of(dir, stem), identity, "{stem}");
            assert!(signed_by_ca(dir, stem), "{stem}");
            assert_eq!(mode(&dir.join(format!("{stem}-key.pem"))), 0o600, "{stem}");
        }
        assert_eq!(mode(&dir.join(CA_KEY)), 0o600);
    }

    fn clusters() -> Vec<String> {
        vec!["dev-east".to_string(), "dev-west".to_string()]
    }

    #[test]
    fn ensure_dev_certs_creates_once_and_then_reuses() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("a/certs");
        ensure_dev_certs(&dir, &[1, 2], &clusters(), "admin").expect("first");
        check_dev_dir(&dir);
        let before = dev_files(&dir);
        ensure_dev_certs(&dir, &[1, 2], &clusters(), "admin").expect("second");
        assert_eq!(dev_files(&dir), before, "the second run changed files");

        // A missing leaf is issued by the existing CA; the rest stay.
        std::fs::remove_file(dir.join("node-2.pem")).expect("rm");
        std::fs::remove_file(dir.join("node-2-key.pem")).expect("rm");
        ensure_dev_certs(&dir, &[1, 2], &clusters(), "admin").expect("third");
        check_dev_dir(&dir);
        let after = dev_files(&dir);
        for ((name, old), (_, new)) in before.iter().zip(&after) {
            assert_eq!(old == new, !name.starts_with("node-2"), "{name}");
        }

        // Without the CA key, a missing leaf cannot be issued.
        std::fs::remove_file(dir.join(CA_KEY)).expect("rm");
        ensure_dev_certs(&dir, &[1, 2], &clusters(), "admin").expect("nothing to issue");
        let err =
            ensure_dev_certs(&dir, &[1, 2, 3], &clusters(), "admin").expect_err("node 3 needs it");
        assert!(
            err.contains("ca-key.pem is missing") && err.contains("node-3.pem"),
            "{err}"
        );
        let err =
            ensure_dev_certs(&dir, &[1], &["Bad".to_string()], "admin").expect_err("bad cluster");
        assert!(err.contains("agent/Bad"), "{err}");
    }

    #[test]
    fn ensure_dev_certs_from_two_threads_at_once() {
        for _ in 0..5 {
            let tmp = tempfile::tempdir().expect("tempdir");
            let dir = Arc::new(tmp.path().join("certs"));
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let dir = Arc::clone(&dir);
                    let barrier = Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        barrier.wait();
                        ensure_dev_certs(&dir, &[1, 2], &clusters(), "admin")
                    })
                })
                .collect();
            for t in threads {
                t.join().expect("thread").expect("ensure_dev_certs");
            }
            check_dev_dir(&dir);
        }
    }
}

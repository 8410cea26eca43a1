//! Who a certificate names. Every certificate `fleetq certs` issues
//! carries one URI subject-alternative name in the SPIFFE style:
//!
//! | identity | URI |
//! |---|---|
//! | control-plane node 3 | `spiffe://fleetq/node/3` |
//! | the agent of cluster `gpu-east` | `spiffe://fleetq/agent/gpu-east` |
//! | tenant `team-a` (a client) | `spiffe://fleetq/tenant/team-a` |
//!
//! Servers authorize by this name, never by the certificate's DNS names
//! (those only prove which address a server may answer for).

use std::collections::HashMap;
use std::sync::Mutex;

use rustls_pki_types::CertificateDer;

/// The URI prefix of every fleetq identity.
pub const TRUST_DOMAIN: &str = "spiffe://fleetq/";

/// What a peer is, as its certificate (or bearer token) says.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identity {
    /// A control-plane node, by Raft id.
    Node(u64),
    /// The agent of one member cluster.
    Agent(String),
    /// A client acting for a tenant.
    Tenant(String),
}

impl Identity {
    /// The URI SAN that names this identity.
    ///
    /// ```
    /// use fleetq_proto::tls::Identity;
    /// assert_eq!(Identity::Node(2).uri(), "spiffe://fleetq/node/2");
    /// assert_eq!(Identity::parse_uri("spiffe://fleetq/agent/east"), Ok(Identity::Agent("east".into())));
    /// ```
    pub fn uri(&self) -> String {
        match self {
            Identity::Node(id) => format!("{TRUST_DOMAIN}node/{id}"),
            Identity::Agent(c) => format!("{TRUST_DOMAIN}agent/{c}"),
            Identity::Tenant(t) => format!("{TRUST_DOMAIN}tenant/{t}"),
        }
    }

    /// Parses a URI SAN; the error says what is wrong with it.
    pub fn parse_uri(uri: &str) -> Result<Identity, String> {
        let rest = uri
            .strip_prefix(TRUST_DOMAIN)
            .ok_or_else(|| format!("{uri:?} is not under {TRUST_DOMAIN}"))?;
        let (kind, name) = rest
            .split_once('/')
            .ok_or_else(|| format!("{uri:?}: expected {TRUST_DOMAIN}KIND/NAME"))?;
        if !valid_name(name) {
            return Err(format!(
                "{uri:?}: the name must be 1-253 characters of a-z, 0-9, '-', '.' or '_'"
            ));
        }
        match kind {
            "node" => name
                .parse::<u64>()
                .ok()
                .filter(|id| *id > 0)
                .map(Identity::Node)
                .ok_or_else(|| format!("{uri:?}: a node id is a positive integer")),
            "agent" => Ok(Identity::Agent(name.to_string())),
            "tenant" => Ok(Identity::Tenant(name.to_string())),
            other => Err(format!(
                "{uri:?}: unknown kind {other:?} (node, agent or tenant)"
            )),
        }
    }

    /// The identity named by a DER certificate: its one fleetq URI SAN.
    pub fn of_certificate(cert: &CertificateDer<'_>) -> Result<Identity, String> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
            .map_err(|e| format!("unreadable certificate: {e}"))?;
        let san = parsed
            .subject_alternative_name()
            .map_err(|e| format!("unreadable subjectAltName: {e}"))?;
        let mut found = Vec::new();
        if let Some(san) = san {
            for name in &san.value.general_names {
                if let x509_parser::extensions::GeneralName::URI(uri) = name {
                    if uri.starts_with(TRUST_DOMAIN) {
                        found.push(Identity::parse_uri(uri)?);
                    }
                }
            }
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(format!(
                "the certificate names no fleetq identity (a URI SAN under {TRUST_DOMAIN})"
            )),
            _ => Err("the certificate names more than one fleetq identity".to_string()),
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::Node(id) => write!(f, "node {id}"),
            Identity::Agent(c) => write!(f, "agent of cluster {c}"),
            Identity::Tenant(t) => write!(f, "tenant {t}"),
        }
    }
}

fn valid_name(name: &str) -> bool {
    (1..=253).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._".contains(&b))
}

/// Identities read from certificates, remembered by certificate. A
/// connection presents the same certificate with every request, and the
/// service door and the handler both ask who it is: parsing the X.509
/// each time was a cost per request, not per connection. Bounded: past
/// [`IdentityCache::CAPACITY`] certificates it starts afresh (only
/// certificates the CA signed reach it, so a caller cannot flood it
/// cheaply).
#[derive(Debug, Default)]
pub struct IdentityCache {
    by_certificate: Mutex<ByCertificate>,
}

/// A certificate's DER bytes -> who it names, or why it names no one.
type ByCertificate = HashMap<Box<[u8]>, Result<Identity, String>>;

impl IdentityCache {
    /// The most certificates remembered.
    pub const CAPACITY: usize = 4096;

    /// [`Identity::of_certificate`], parsed once per certificate.
    pub fn identity(&self, cert: &CertificateDer<'_>) -> Result<Identity, String> {
        if let Some(known) = self.lock().get(cert.as_ref()) {
            return known.clone();
        }
        let parsed = Identity::of_certificate(cert);
        let mut known = self.lock();
        if known.len() >= Self::CAPACITY {
            known.clear();
        }
        known.insert(cert.as_ref().into(), parsed.clone());
        parsed
    }

    /// How many certificates it remembers.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByCertificate> {
        // A panic while holding it cannot leave the map half-written in
        // a way that matters: every entry is whole.
        self.by_certificate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_answers_as_the_certificate_does_and_stays_bounded() {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert_of = |identity: &Identity| {
            let mut params =
                rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
            params.subject_alt_names.push(rcgen::SanType::URI(
                rcgen::string::Ia5String::try_from(identity.uri()).expect("uri"),
            ));
            params.self_signed(&key).expect("cert").der().clone()
        };
        let cache = IdentityCache::default();
        let east = cert_of(&Identity::Agent("east".into()));
        let team = cert_of(&Identity::Tenant("team-a".into()));
        for _ in 0..3 {
            assert_eq!(cache.identity(&east), Ok(Identity::Agent("east".into())));
            assert_eq!(cache.identity(&team), Ok(Identity::Tenant("team-a".into())));
        }
        assert_eq!(cache.len(), 2);
        // A refusal is remembered too, and still says why.
        let junk = CertificateDer::from(vec![0u8; 16]);
        let err = cache.identity(&junk).expect_err("not a certificate");
        assert!(err.contains("unreadable certificate"), "{err}");
        assert_eq!(cache.identity(&junk), Err(err));
        for i in 0..IdentityCache::CAPACITY {
            let _ = cache.identity(&CertificateDer::from(i.to_be_bytes().to_vec()));
        }
        assert!(cache.len() <= IdentityCache::CAPACITY);
        assert_eq!(cache.identity(&east), Ok(Identity::Agent("east".into())));
    }

    #[test]
    fn uris_round_trip_and_bad_ones_say_why() {
        for id in [
            Identity::Node(7),
            Identity::Agent("gpu-east".into()),
            Identity::Tenant("team-a".into()),
        ] {
            assert_eq!(Identity::parse_uri(&id.uri()), Ok(id));
        }
        for (bad, why) in [
            ("spiffe://other/node/1", "not under"),
            ("spiffe://fleetq/node/0", "positive integer"),
            ("spiffe://fleetq/node/x", "positive integer"),
            ("spiffe://fleetq/admin/x", "unknown kind"),
            ("spiffe://fleetq/tenant/", "1-253 characters"),
            ("spiffe://fleetq/tenant/A/b", "1-253 characters"),
            ("spiffe://fleetq/tenant", "KIND/NAME"),
        ] {
            let err = Identity::parse_uri(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn a_certificate_names_its_identity() {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.subject_alt_names.push(rcgen::SanType::URI(
            rcgen::string::Ia5String::try_from(Identity::Agent("east".into()).uri()).expect("uri"),
        ));
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(
            Identity::of_certificate(cert.der()),
            Ok(Identity::Agent("east".into()))
        );
        let plain = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let err = Identity::of_certificate(plain.der()).expect_err("no identity");
        assert!(err.contains("names no fleetq identity"), "{err}");
    }
}

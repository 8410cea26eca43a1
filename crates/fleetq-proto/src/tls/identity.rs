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

#[cfg(test)]
mod tests {
    use super::*;

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

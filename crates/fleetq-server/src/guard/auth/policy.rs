//! The authorization policy: tenants, their namespaces, verbs and bearer
//! tokens, read from a YAML file (`--auth-policy`).
//!
//! ```yaml
//! tenants:
//!   - name: platform          # a client certificate naming
//!     admin: true             # spiffe://fleetq/tenant/platform
//!   - name: team-a
//!     namespaces: [team-a]    # "*" means every namespace
//!     verbs: [submit, cancel, get]   # the default; "apply" adds LocalQueues
//!     tokens: ["sha256:9f86d0..."]   # bearer tokens, by SHA-256 (fleetq certs token)
//! ```
//!
//! Admins may do everything, including applying cluster-scoped objects
//! (ResourceFlavor, Cohort, ClusterQueue, WorkloadPriorityClass), draining
//! clusters and changing the Raft group. Without a policy file only the
//! tenant `admin` is known, as an admin.

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// What a tenant may do in its namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// Submit workloads (Submit, and Workload/Job documents in Apply).
    Submit,
    /// Cancel workloads.
    Cancel,
    /// Read workloads, LocalQueues, pending lists; and the cluster-wide
    /// view (ClusterQueues, cohorts, flavors, clusters, Raft status).
    Get,
    /// Apply and delete LocalQueues.
    Apply,
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verb::Submit => "submit",
            Verb::Cancel => "cancel",
            Verb::Get => "get",
            Verb::Apply => "apply",
        })
    }
}

fn default_verbs() -> Vec<Verb> {
    vec![Verb::Submit, Verb::Cancel, Verb::Get]
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tenant {
    pub name: String,
    #[serde(default)]
    pub admin: bool,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default = "default_verbs")]
    pub verbs: Vec<Verb>,
    /// `sha256:HEX` of each bearer token that acts as this tenant.
    #[serde(default)]
    pub tokens: Vec<String>,
}

impl Tenant {
    pub fn may(&self, verb: Verb, namespace: &str) -> bool {
        self.admin
            || (self.verbs.contains(&verb)
                && self.namespaces.iter().any(|n| n == "*" || n == namespace))
    }

    pub fn has_verb(&self, verb: Verb) -> bool {
        self.admin || self.verbs.contains(&verb)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    tenants: Vec<Tenant>,
}

/// The parsed policy, indexed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    tenants: BTreeMap<String, Tenant>,
    /// Token digest (lowercase hex) -> tenant name.
    tokens: BTreeMap<String, String>,
}

impl Default for Policy {
    /// Only `admin`, an admin: what a server runs without a policy file.
    fn default() -> Policy {
        let admin = Tenant {
            name: "admin".into(),
            admin: true,
            namespaces: Vec::new(),
            verbs: Vec::new(),
            tokens: Vec::new(),
        };
        Policy {
            tenants: [("admin".to_string(), admin)].into(),
            tokens: BTreeMap::new(),
        }
    }
}

/// The lowercase hex SHA-256 of a bearer token, as the policy stores it.
pub fn token_digest(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Policy {
    /// Parses the YAML text; errors name the field (`tenants[1].verbs[0]`).
    pub fn parse(text: &str) -> Result<Policy, String> {
        let de = serde_norway::Deserializer::from_str(text);
        let file: PolicyFile = serde_path_to_error::deserialize(de)
            .map_err(|e| format!("{}: {}", e.path(), e.inner()))?;
        let mut tenants = BTreeMap::new();
        let mut tokens = BTreeMap::new();
        for (i, t) in file.tenants.into_iter().enumerate() {
            let at = format!("tenants[{i}]");
            fleetq_proto::tls::Identity::parse_uri(
                &fleetq_proto::tls::Identity::Tenant(t.name.clone()).uri(),
            )
            .map_err(|e| format!("{at}.name: {e}"))?;
            if !t.admin && t.namespaces.is_empty() {
                return Err(format!(
                    "{at}.namespaces: tenant {:?} has no namespaces (list them, \"*\" for all, or set admin: true)",
                    t.name
                ));
            }
            for (j, token) in t.tokens.iter().enumerate() {
                let hex = token
                    .strip_prefix("sha256:")
                    .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                    .ok_or_else(|| {
                        format!("{at}.tokens[{j}]: expected sha256:<64 hex digits> (fleetq certs token prints it)")
                    })?
                    .to_ascii_lowercase();
                if let Some(other) = tokens.insert(hex, t.name.clone()) {
                    return Err(format!(
                        "{at}.tokens[{j}]: the same token is already tenant {other:?}'s"
                    ));
                }
            }
            if tenants.insert(t.name.clone(), t).is_some() {
                return Err(format!("{at}.name: a second tenant of that name"));
            }
        }
        Ok(Policy { tenants, tokens })
    }

    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.tenants.get(name)
    }

    /// The tenant a bearer token acts as.
    pub fn tenant_of_token(&self, token: &str) -> Option<&Tenant> {
        self.tokens
            .get(&token_digest(token))
            .and_then(|name| self.tenants.get(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
tenants:
  - name: platform
    admin: true
  - name: team-a
    namespaces: [team-a]
    tokens: ["sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"]
  - name: readers
    namespaces: ["*"]
    verbs: [get]
"#;

    #[test]
    fn tenants_tokens_and_verbs() {
        let p = Policy::parse(POLICY).expect("valid");
        let a = p.tenant("team-a").expect("team-a");
        assert!(a.may(Verb::Submit, "team-a"));
        assert!(a.may(Verb::Get, "team-a"));
        assert!(!a.may(Verb::Submit, "team-b"));
        assert!(!a.may(Verb::Apply, "team-a"), "apply is not a default verb");
        assert_eq!(
            p.tenant_of_token("hello").map(|t| t.name.as_str()),
            Some("team-a")
        );
        assert!(p.tenant_of_token("hello ").is_none());
        let r = p.tenant("readers").expect("readers");
        assert!(r.may(Verb::Get, "anything") && !r.may(Verb::Submit, "anything"));
        assert!(p
            .tenant("platform")
            .expect("platform")
            .may(Verb::Apply, "x"));
        assert!(p.tenant("nobody").is_none());
    }

    #[test]
    fn bad_policies_name_the_field() {
        for (text, want) in [
            (
                "tenants:\n  - name: a\n    namespaces: [x]\n    verbs: [submit, delete]\n",
                "tenants[0].verbs[1]",
            ),
            ("tenants:\n  - name: a\n", "tenants[0].namespaces"),
            (
                "tenants:\n  - name: a\n    admin: true\n    tokens: [abc]\n",
                "tenants[0].tokens[0]",
            ),
            (
                "tenants:\n  - name: A\n    admin: true\n",
                "tenants[0].name",
            ),
            (
                "tenants:\n  - name: a\n    admin: true\n    colour: red\n",
                "colour",
            ),
            (
                "tenants:\n  - name: a\n    admin: true\n  - name: a\n    admin: true\n",
                "tenants[1].name",
            ),
        ] {
            let err = Policy::parse(text).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn the_default_knows_only_admin() {
        let p = Policy::default();
        assert!(p.tenant("admin").expect("admin").admin);
        assert!(p.tenant("team-a").is_none());
    }
}

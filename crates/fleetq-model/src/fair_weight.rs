//! Fair-sharing weights (`fairSharing.weight` of ClusterQueues, Cohorts
//! and LocalQueues), exact to the nano-unit, Kubernetes' finest.
//!
//! A weight is a Kubernetes quantity, but unlike a resource amount its
//! small values matter: Kueue accepts `2n` and divides shares by it. A
//! [`Quantity`](crate::Quantity) rounds up to thousandths, which stored
//! `2n` 500,000 times too large; this type keeps nano-units.
//!
//! ```
//! use fleetq_model::fair_weight::FairWeight;
//! let w: FairWeight = "2n".parse().unwrap();
//! assert_eq!(w.nanos(), 2);
//! assert_eq!(w.to_string(), "2n");
//! assert_eq!("0.5".parse::<FairWeight>().unwrap().to_string(), "500m");
//! ```

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::quantity::{parse_scaled, QuantityError};

const NANOS_PER_UNIT: u64 = 1_000_000_000;

/// A non-negative fair-sharing weight in nano-units (1 = 10^9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FairWeight(u64);

impl FairWeight {
    /// Kueue's default weight.
    pub const ONE: FairWeight = FairWeight(NANOS_PER_UNIT);

    pub fn from_nanos(nanos: u64) -> FairWeight {
        FairWeight(nanos)
    }

    pub fn nanos(self) -> u64 {
        self.0
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// The weight as a float, for shares (only the leader's scheduler
    /// computes a share; nothing stores one).
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_UNIT as f64
    }

    /// Kueue's rule: a weight is 0 or more than 1e-9 (`1n` is refused).
    pub fn problem(self) -> Option<String> {
        (self.0 == 1).then(|| "must be 0 or greater than 1e-9 (1n)".to_string())
    }
}

impl Default for FairWeight {
    fn default() -> Self {
        FairWeight::ONE
    }
}

impl FromStr for FairWeight {
    type Err = QuantityError;

    fn from_str(input: &str) -> Result<FairWeight, QuantityError> {
        let nanos = parse_scaled(input, 9)?;
        u64::try_from(nanos)
            .map(FairWeight)
            .map_err(|_| QuantityError::Overflow(input.to_string()))
    }
}

impl fmt::Display for FairWeight {
    /// The shortest exact form: `2`, `500m`, `250u`, `2n`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n % NANOS_PER_UNIT == 0 {
            write!(f, "{}", n / NANOS_PER_UNIT)
        } else if n % 1_000_000 == 0 {
            write!(f, "{}m", n / 1_000_000)
        } else if n % 1_000 == 0 {
            write!(f, "{}u", n / 1_000)
        } else {
            write!(f, "{n}n")
        }
    }
}

impl Serialize for FairWeight {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FairWeight {
    /// A string (`"2n"`), an integer or a float, as for quantities. Weights
    /// stored before this type (as quantities: `"1"`, `"500m"`) read the
    /// same.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FairWeight, D::Error> {
        struct WeightVisitor;
        impl Visitor<'_> for WeightVisitor {
            type Value = FairWeight;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a weight such as 1, 0.5, 500m or 2n")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FairWeight, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FairWeight, E> {
                v.checked_mul(NANOS_PER_UNIT)
                    .map(FairWeight)
                    .ok_or_else(|| E::custom(QuantityError::Overflow(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FairWeight, E> {
                if v < 0 {
                    return Err(E::custom(QuantityError::Negative(v.to_string())));
                }
                self.visit_u64(v as u64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FairWeight, E> {
                if !v.is_finite() {
                    return Err(E::custom(QuantityError::Malformed(v.to_string())));
                }
                format!("{v}").parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_any(WeightVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> FairWeight {
        s.parse().expect("weight")
    }

    #[test]
    fn keeps_nano_precision_and_prints_it_back() {
        assert_eq!(w("2n").nanos(), 2);
        assert_eq!(w("1").nanos(), 1_000_000_000);
        assert_eq!(w("0.5").nanos(), 500_000_000);
        assert_eq!(w("1.5e-9").nanos(), 2, "finer than 1n rounds up");
        assert_eq!(w("3u").to_string(), "3u");
        for s in ["0", "1", "2n", "500m", "250u", "17", "1500m"] {
            assert_eq!(w(s).to_string(), s);
            assert_eq!(w(&w(s).to_string()), w(s));
        }
        assert!("-1".parse::<FairWeight>().is_err());
        assert!("20G".parse::<FairWeight>().is_err(), "beyond u64 nanos");
    }

    #[test]
    fn kueue_refuses_a_weight_of_exactly_one_nano() {
        assert!(w("1n").problem().is_some());
        assert!(w("2n").problem().is_none());
        assert!(w("0").problem().is_none());
    }

    #[test]
    fn reads_weights_stored_as_quantities_and_numbers() {
        let from_json = |j: &str| serde_json::from_str::<FairWeight>(j).expect("json");
        assert_eq!(from_json("\"500m\""), w("0.5"));
        assert_eq!(from_json("2"), w("2"));
        assert_eq!(from_json("0.25"), w("250m"));
        assert_eq!(serde_json::to_string(&w("2n")).expect("json"), "\"2n\"");
    }
}

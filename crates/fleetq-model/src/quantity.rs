//! Exact resource quantities in Kubernetes notation.
//!
//! A [`Quantity`] is a non-negative count of *milli-units* held in a `u64`.
//! `4` GPUs are `4000` milli-units, `500m` CPU is `500`, `64Gi` of memory is
//! `64 * 2^30 * 1000`. The ledger never sees a float: every sum, difference
//! and comparison is exact and overflow is an error, not a wrap.
//!
//! ```
//! use fleetq_model::Quantity;
//! let q: Quantity = "64Gi".parse().unwrap();
//! assert_eq!(q.to_string(), "64Gi");
//! assert_eq!("1.5".parse::<Quantity>().unwrap().milli(), 1500);
//! assert!("-1".parse::<Quantity>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The largest representable quantity, in milli-units. Kept at `i64::MAX` so
/// that signed differences between two quantities never overflow.
pub const MAX_MILLI: u64 = i64::MAX as u64;

/// A non-negative resource amount, exact to the milli-unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity(u64);

/// Why a quantity string was refused. Every variant quotes the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity {0:?} is empty")]
    Empty(String),
    #[error("quantity {0:?} is negative; quotas and requests must be >= 0")]
    Negative(String),
    #[error("quantity {0:?} is malformed: expected a number with an optional suffix (m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 2e3)")]
    Malformed(String),
    #[error("quantity {0:?} is too large (the limit is about 9.2e15 units)")]
    Overflow(String),
    #[error("quantity {0:?} is finer than fleetq keeps: quantities are exact to 1m (a thousandth of a unit); round it to thousandths")]
    TooPrecise(String),
}

impl Quantity {
    pub const ZERO: Quantity = Quantity(0);

    /// A quantity of `milli` milli-units.
    pub const fn from_milli(milli: u64) -> Quantity {
        Quantity(milli)
    }

    /// A whole number of units (`4` GPUs, `2` CPUs).
    ///
    /// Saturates at [`MAX_MILLI`]; use [`Quantity::checked_units`] for input.
    pub const fn units(units: u64) -> Quantity {
        match units.checked_mul(1000) {
            Some(m) if m <= MAX_MILLI => Quantity(m),
            _ => Quantity(MAX_MILLI),
        }
    }

    pub fn checked_units(units: u64) -> Option<Quantity> {
        units
            .checked_mul(1000)
            .filter(|m| *m <= MAX_MILLI)
            .map(Quantity)
    }

    pub const fn milli(self) -> u64 {
        self.0
    }

    /// Whole units, rounded up (a pod asking `500m` GPU memory needs 1 GiB).
    pub const fn units_ceil(self) -> u64 {
        self.0.div_ceil(1000)
    }

    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        self.0
            .checked_add(other.0)
            .filter(|m| *m <= MAX_MILLI)
            .map(Quantity)
    }

    pub fn checked_sub(self, other: Quantity) -> Option<Quantity> {
        self.0.checked_sub(other.0).map(Quantity)
    }

    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity(self.0.saturating_add(other.0).min(MAX_MILLI))
    }

    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity(self.0.saturating_sub(other.0))
    }

    pub fn checked_mul(self, factor: u64) -> Option<Quantity> {
        self.0
            .checked_mul(factor)
            .filter(|m| *m <= MAX_MILLI)
            .map(Quantity)
    }

    pub fn saturating_mul(self, factor: u64) -> Quantity {
        Quantity(self.0.saturating_mul(factor).min(MAX_MILLI))
    }
}

/// Decimal suffixes as powers of ten, binary suffixes as powers of 1024.
enum Suffix {
    Decimal(i32),
    Binary(u32),
}

fn split_suffix(s: &str) -> (&str, Suffix) {
    const BINARY: [(&str, u32); 6] = [
        ("Ki", 1),
        ("Mi", 2),
        ("Gi", 3),
        ("Ti", 4),
        ("Pi", 5),
        ("Ei", 6),
    ];
    for (suffix, power) in BINARY {
        if let Some(number) = s.strip_suffix(suffix) {
            return (number, Suffix::Binary(power));
        }
    }
    const DECIMAL: [(char, i32); 9] = [
        ('n', -9),
        ('u', -6),
        ('m', -3),
        ('k', 3),
        ('M', 6),
        ('G', 9),
        ('T', 12),
        ('P', 15),
        ('E', 18),
    ];
    for (suffix, power) in DECIMAL {
        if let Some(number) = s.strip_suffix(suffix) {
            return (number, Suffix::Decimal(power));
        }
    }
    // An exponent (`2e3`, `1E-3`) is a decimal suffix too.
    if let Some(pos) = s.find(['e', 'E']) {
        let (number, exponent) = (&s[..pos], &s[pos + 1..]);
        let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if !digits.is_empty() && digits.len() <= 4 && digits.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(e) = exponent.parse::<i32>() {
                return (number, Suffix::Decimal(e));
            }
        }
        return ("", Suffix::Decimal(0));
    }
    (s, Suffix::Decimal(0))
}

/// Parses Kubernetes quantity notation into units of `10^-scale` (3:
/// milli-units, 9: nano-units), rounding a finer amount up, as
/// Kubernetes does. Fails only on malformed, negative or (beyond u128)
/// huge input; the caller checks its own range.
pub(crate) fn parse_scaled(input: &str, scale: i32) -> Result<u128, QuantityError> {
    let s = input.trim();
    let err_malformed = || QuantityError::Malformed(input.to_string());
    let err_overflow = || QuantityError::Overflow(input.to_string());
    if s.is_empty() {
        return Err(QuantityError::Empty(input.to_string()));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let (number, suffix) = split_suffix(s);
    if number.starts_with('-') {
        return Err(QuantityError::Negative(input.to_string()));
    }
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(err_malformed());
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(err_malformed());
    }
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 36 {
        return Err(err_overflow());
    }
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| err_malformed())?
    };
    let frac_len = frac_part.len() as i32;
    let (pow10, pow1024) = match suffix {
        Suffix::Decimal(p) => (p, 0),
        Suffix::Binary(p) => (0, p),
    };
    // value = mantissa * 10^(pow10 + scale - frac_len) * 1024^pow1024
    let binary = 1024u128.pow(pow1024);
    let scaled = mantissa.checked_mul(binary).ok_or_else(err_overflow)?;
    let exp = pow10 + scale - frac_len;
    if exp >= 0 {
        match 10u128.checked_pow(exp as u32) {
            Some(f) => scaled.checked_mul(f).ok_or_else(err_overflow),
            None if scaled == 0 => Ok(0),
            None => Err(err_overflow()),
        }
    } else {
        Ok(match 10u128.checked_pow((-exp) as u32) {
            Some(d) => scaled.div_ceil(d),
            // The divisor exceeds u128, so any non-zero amount is below one unit.
            None => u128::from(scaled > 0),
        })
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    /// Parses Kubernetes quantity notation. An amount finer than a
    /// milli-unit (`1n`, `1500u`) is refused by name rather than rounded:
    /// Kubernetes keeps nano-units, fleetq keeps thousandths, and a silent
    /// rounding would change what a quota or request means.
    fn from_str(input: &str) -> Result<Quantity, QuantityError> {
        let nanos = parse_scaled(input, 9)?;
        if nanos % 1_000_000 != 0 {
            return Err(QuantityError::TooPrecise(input.to_string()));
        }
        let milli = nanos / 1_000_000;
        if milli > u128::from(MAX_MILLI) {
            return Err(QuantityError::Overflow(input.to_string()));
        }
        Ok(Quantity(milli as u64))
    }
}

impl fmt::Display for Quantity {
    /// The canonical form: `500m` below a unit; small whole numbers plain
    /// (`8`, `2000`); large ones with the exact decimal suffix if there is
    /// one (`5G`), else the exact binary suffix (`64Gi`), else plain.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % 1000 != 0 {
            return write!(f, "{}m", self.0);
        }
        let units = self.0 / 1000;
        if units < 1_000_000 {
            return write!(f, "{units}");
        }
        const DECIMAL: [(&str, u64); 6] = [
            ("E", 1_000_000_000_000_000_000),
            ("P", 1_000_000_000_000_000),
            ("T", 1_000_000_000_000),
            ("G", 1_000_000_000),
            ("M", 1_000_000),
            ("k", 1_000),
        ];
        for (suffix, factor) in DECIMAL {
            if units % factor == 0 {
                return write!(f, "{}{suffix}", units / factor);
            }
        }
        const BINARY: [(&str, u64); 6] = [
            ("Ei", 1 << 60),
            ("Pi", 1 << 50),
            ("Ti", 1 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ];
        for (suffix, factor) in BINARY {
            if units % factor == 0 {
                return write!(f, "{}{suffix}", units / factor);
            }
        }
        write!(f, "{units}")
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    /// Accepts a string (`"64Gi"`), an integer (`8`) or a float (`1.5`), as
    /// YAML authors write all three.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Quantity, D::Error> {
        struct QuantityVisitor;
        impl Visitor<'_> for QuantityVisitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity such as 8, 500m or 64Gi")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Quantity::checked_units(v)
                    .ok_or_else(|| E::custom(QuantityError::Overflow(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                if v < 0 {
                    return Err(E::custom(QuantityError::Negative(v.to_string())));
                }
                self.visit_u64(v as u64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
                if !v.is_finite() {
                    return Err(E::custom(QuantityError::Malformed(v.to_string())));
                }
                // Shortest round-trip decimal form, then exact parsing.
                format!("{v}").parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_any(QuantityVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    #[test]
    fn parses_kubernetes_notation() {
        assert_eq!(q("4").milli(), 4_000);
        assert_eq!(q("500m").milli(), 500);
        assert_eq!(q("64Gi").milli(), 64 * (1u64 << 30) * 1000);
        assert_eq!(q("1.5").milli(), 1_500);
        assert_eq!(q("2e3").milli(), 2_000_000);
        assert_eq!(q("1E-3").milli(), 1);
        assert_eq!(q("10k").milli(), 10_000_000);
        assert_eq!(q("0.5Gi").milli(), (1u64 << 29) * 1000);
        assert_eq!(q(".5").milli(), 500);
        assert_eq!(q("+3").milli(), 3_000);
        assert_eq!(q("0").milli(), 0);
    }

    #[test]
    fn sub_milli_is_refused_not_rounded() {
        for fine in ["1n", "1500u", "1e-40", "0.0001", "1.0005", "1.5e-3"] {
            let err = fine.parse::<Quantity>().unwrap_err();
            assert_eq!(err, QuantityError::TooPrecise(fine.to_string()));
            assert!(err.to_string().contains("exact to 1m"), "{err}");
        }
        // Written finely but a whole number of thousandths: exact.
        assert_eq!(q("1000000n").milli(), 1);
        assert_eq!(q("2000u").milli(), 2);
        assert_eq!(q("5e-3").milli(), 5);
    }

    #[test]
    fn rejects_bad_input_and_quotes_it() {
        for bad in [
            "", "abc", "1.2.3", "4 GPUs", "1Zi", "Gi", ".", "1e", "e3", "1ee3", "0x10",
        ] {
            let err = bad.parse::<Quantity>().unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        assert!(matches!(
            "-1".parse::<Quantity>(),
            Err(QuantityError::Negative(_))
        ));
        assert!(matches!(
            "-500m".parse::<Quantity>(),
            Err(QuantityError::Negative(_))
        ));
        assert!(matches!(
            "100Ei".parse::<Quantity>(),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            "1e300".parse::<Quantity>(),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            "99999999999999999999999999999999999999999".parse::<Quantity>(),
            Err(QuantityError::Overflow(_))
        ));
    }

    #[test]
    fn prints_canonically() {
        for (input, canonical) in [
            ("4", "4"),
            ("500m", "500m"),
            ("64Gi", "64Gi"),
            ("1.5", "1500m"),
            ("2e3", "2000"),
            ("2000000", "2M"),
            ("1024", "1024"),
            ("2Mi", "2Mi"),
            ("5G", "5G"),
        ] {
            assert_eq!(q(input).to_string(), canonical, "{input}");
        }
    }

    #[test]
    fn deserializes_numbers_and_strings() {
        let v: Vec<Quantity> = serde_json::from_str(r#"[8, 1.5, "64Gi"]"#).unwrap();
        assert_eq!(v, vec![q("8"), q("1500m"), q("64Gi")]);
        assert!(serde_json::from_str::<Quantity>("-2").is_err());
    }

    proptest! {
        #[test]
        fn canonical_form_round_trips(milli in 0u64..=MAX_MILLI) {
            let quantity = Quantity::from_milli(milli);
            prop_assert_eq!(quantity.to_string().parse::<Quantity>().unwrap(), quantity);
        }

        #[test]
        fn whole_units_round_trip(units in 0u64..9_000_000_000_000u64) {
            let quantity = Quantity::units(units);
            prop_assert_eq!(q(&units.to_string()), quantity);
        }

        #[test]
        fn addition_is_exact_and_checked(a in 0u64..=MAX_MILLI, b in 0u64..=MAX_MILLI) {
            let sum = Quantity::from_milli(a).checked_add(Quantity::from_milli(b));
            match a.checked_add(b) {
                Some(s) if s <= MAX_MILLI => prop_assert_eq!(sum, Some(Quantity::from_milli(s))),
                _ => prop_assert_eq!(sum, None),
            }
        }
    }
}

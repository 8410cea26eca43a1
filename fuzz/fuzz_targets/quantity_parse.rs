//! Any string parsed as a Kubernetes quantity: parsing never panics, and a
//! quantity that parses prints in a canonical form that parses back to the
//! same value (and prints the same again). The JSON/YAML paths (string,
//! integer or float) hold to the same.
#![no_main]

use fleetq_model::Quantity;

fn canonical(q: Quantity) {
    let text = q.to_string();
    let again: Quantity = text
        .parse()
        .unwrap_or_else(|e| panic!("canonical form {text:?} of {q:?} does not parse: {e}"));
    assert_eq!(again, q, "{text:?}");
    assert_eq!(again.to_string(), text);
    fleetq_fuzz::json_round_trip(&q);
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(q) = s.parse::<Quantity>() {
            canonical(q);
            // Surrounding whitespace is trimmed; a sign of + is allowed.
            assert_eq!(format!(" {s} ").parse::<Quantity>(), Ok(q));
        }
    }
    // The serde paths: `8`, `1.5`, `"64Gi"` as YAML and JSON authors write them.
    if let Ok(q) = serde_json::from_slice::<Quantity>(data) {
        canonical(q);
    }
});

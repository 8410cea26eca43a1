//! The API's submission path, as a hostile tenant reaches it: any bytes as
//! a Workload's JSON (`SubmitRequest.workload_json`). Decoding never
//! panics; what decodes is checked against the size limits the API applies
//! before proposing (fleetq_model::limits), and what passes them is bound
//! against a configuration as apply() binds it. Whatever the input, the
//! answer is bounded: at most MAX_ERRORS + 1 errors, none longer than a
//! few kilobytes (a 280 KB workload once produced one error per request,
//! each with its long name, 5 GB on every replica).
#![no_main]

use std::sync::OnceLock;

use fleetq_model::config::Config;
use fleetq_model::kueue::import_manifests;
use fleetq_model::limits::MAX_ERRORS;
use fleetq_model::{FieldError, Workload};

const SAMPLE: &str = include_str!("../../deploy/dev/sample.yaml");

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let mut config = Config::default();
        for doc in import_manifests(SAMPLE).expect("the dev sample imports") {
            config.upsert(doc.object).expect("configuration only");
        }
        config
    })
}

fn bounded(errors: &[FieldError]) {
    assert!(errors.len() <= MAX_ERRORS + 1, "{} errors", errors.len());
    for e in errors {
        let text = e.to_string();
        assert!(text.len() < 4096, "an error of {} bytes: {}", text.len(), &text[..200]);
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(workload) = serde_json::from_slice::<Workload>(data) else {
        return;
    };
    match workload.check_limits() {
        Err(e) => bounded(&[e]),
        Ok(()) => {
            if let Err(errors) = config().bind_workload(&workload) {
                bounded(&errors);
            }
        }
    }
});

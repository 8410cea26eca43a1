//! Runs `command_apply` inputs outside libFuzzer, printing every command
//! and response (for triage of a crash or a corpus entry):
//! `cargo run --manifest-path fuzz/Cargo.toml --example replay -- FILE...`
fn main() {
    std::env::set_var("FLEETQ_FUZZ_VERBOSE", "1");
    for path in std::env::args().skip(1) {
        let data = std::fs::read(&path).expect("read input");
        println!("== {path} ({} bytes)", data.len());
        fleetq_fuzz::apply::Harness::run(&data);
        println!("== {path}: ok");
    }
}

//! Generates the gRPC code from ../../proto with a vendored protoc, so a
//! fresh machine needs nothing installed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = ["api.proto", "agent.proto", "raft.proto"].map(|f| root.join("fleetq/v1").join(f));
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure().compile_with_config(
        config,
        &files,
        std::slice::from_ref(&root),
    )?;
    Ok(())
}

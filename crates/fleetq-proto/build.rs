//! Generates the gRPC code from ../../proto with a vendored protoc, so a
//! fresh machine needs nothing installed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // Read when the script runs, not baked in when it is compiled: one
    // compiled script may serve two checkouts sharing a target directory.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest_dir).join("../../proto");
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

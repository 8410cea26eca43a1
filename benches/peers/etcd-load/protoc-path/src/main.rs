//! Prints the path of the protoc binary vendored by `protoc-bin-vendored`,
//! for `PROTOC=$(cargo run -q -p protoc-path)` before building etcd-load.
fn main() {
    match protoc_bin_vendored::protoc_bin_path() {
        Ok(p) => println!("{}", p.display()),
        Err(e) => {
            eprintln!("protoc-path: {e}");
            std::process::exit(1);
        }
    }
}

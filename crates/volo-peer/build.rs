//! Generates Volo's code for the benchmark IDL into `OUT_DIR/volo_gen.rs`.

fn main() {
    const IDL: &str = "../../idl/echo.thrift";
    println!("cargo:rerun-if-changed={IDL}");
    if let Err(e) = volo_build::Builder::thrift().add_service(IDL).write() {
        panic!("volo-build failed on {IDL}: {e:#}");
    }
}

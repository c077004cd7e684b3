//! Compiles `proto/autotuning.proto` (hlo-opt's own declaration of XLA's
//! autotuning messages) into a descriptor set for prost-reflect's text
//! format (`src/tile/xla_gpu/textproto.rs`), with protox: pure Rust, no
//! protoc on the machine.

fn main() {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["autotuning.proto"], ["proto"])
        .unwrap_or_else(|e| panic!("proto/autotuning.proto: {e}"));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let bytes = prost::Message::encode_to_vec(&fds);
    std::fs::write(out.join("autotuning.fds"), bytes).expect("writes the descriptor set");
}

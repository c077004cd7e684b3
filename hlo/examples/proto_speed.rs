//! Measures `HloModuleProto` throughput for `bench_proto_vs_xla.py`:
//! `proto_speed ITERATIONS TEXT PROTO` times, best of ITERATIONS each,
//! reading the serialized proto PROTO into a module (`proto::from_bytes_lossy`),
//! writing that module back to bytes (`proto::to_bytes`), and text -> proto
//! (`parse_module` of TEXT, then `to_bytes`); prints one line
//! `<proto bytes>\t<read s>\t<write s>\t<text->proto s>`.
use std::time::Instant;

fn fail(msg: String) -> ! {
    eprintln!("proto_speed: {msg}");
    std::process::exit(1);
}

fn best<T>(iters: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..iters.max(1) {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [iters, text_path, proto_path] = &args[..] else {
        fail("usage: proto_speed ITERATIONS TEXT PROTO".into());
    };
    let iters: usize = iters
        .parse()
        .unwrap_or_else(|_| fail(format!("bad count {iters}")));
    let text =
        std::fs::read_to_string(text_path).unwrap_or_else(|e| fail(format!("{text_path}: {e}")));
    let bytes = std::fs::read(proto_path).unwrap_or_else(|e| fail(format!("{proto_path}: {e}")));
    let (m, _) =
        hlo::proto::from_bytes_lossy(&bytes).unwrap_or_else(|e| fail(format!("{proto_path}: {e}")));
    let read = best(iters, || {
        hlo::proto::from_bytes_lossy(&bytes).map(|(m, _)| m)
    });
    // A write that fails would time its error path: fail instead.
    let write = best(iters, || {
        hlo::proto::to_bytes(&m).unwrap_or_else(|e| fail(format!("{proto_path}: {e}")))
    });
    let text_to_proto = best(iters, || {
        let m = hlo::parse_module(&text).unwrap_or_else(|e| fail(format!("{text_path}: {e}")));
        hlo::proto::to_bytes(&m).unwrap_or_else(|e| fail(format!("{text_path}: {e}")))
    });
    println!("{}\t{read}\t{write}\t{text_to_proto}", bytes.len());
}

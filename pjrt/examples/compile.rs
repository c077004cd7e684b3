//! Compiles a module on XLA:CPU through PJRT and runs it once:
//! `compile FILE [xla|kept|legal]` (kept: layouts kept, no legalization;
//! legal: legalized, layouts kept). Prints the outputs' shapes and the
//! optimized program's non-default layouts.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), mode) = (args.get(1), args.get(2).map_or("xla", String::as_str)) else {
        return Err("usage: compile FILE [xla|kept|legal]".into());
    };
    let mut m = hlo::parse_module(&std::fs::read_to_string(path)?)?;
    if mode == "legal" {
        for l in pjrt::legalize::legalize_xla_cpu(&mut m)?.lines {
            eprintln!("legalize: {l}");
        }
    }
    let pipeline = if mode == "xla" {
        pjrt::Pipeline::Xla
    } else {
        pjrt::Pipeline::LayoutsKept
    };
    let mut b = pjrt::Backend::start(&pjrt::find_plugin(None)?)?;
    b.set_inputs(&pjrt::inputs_for(&m, 0)?)?;
    let c = b.compile(&pjrt::proto::module_proto(&m)?, pipeline)?;
    if let Some(out) = std::env::var_os("OPTIMIZED_OUT") {
        std::fs::write(out, &c.optimized)?;
    }
    println!(
        "compiled in {:.2} s, {} outputs",
        c.compile_seconds, c.num_outputs
    );
    for l in pjrt::proto::instruction_layouts(&c.optimized)? {
        if let Some(m2m) = &l.minor_to_major {
            if m2m.len() > 1 && !m2m.iter().rev().enumerate().all(|(i, &d)| d == i as i64) {
                println!("  {} %{} {:?} ({})", l.opcode, l.name, m2m, l.computation);
            }
        }
    }
    for o in b.outputs(c.id)? {
        let v = pjrt::values(&o);
        let sum: f64 = v.iter().sum();
        let weighted: f64 = v.iter().enumerate().map(|(i, x)| x * (i % 7) as f64).sum();
        println!(
            "output {}{:?} sum {sum:.6} weighted {weighted:.6}",
            o.ty.name(),
            o.dims
        );
    }
    let t = b.run(c.id, 5)?;
    println!("runs: {t:?}");
    Ok(())
}

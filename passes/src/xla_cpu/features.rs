//! The program features the XLA:CPU kernel model reads: one row per module,
//! summarising where its work is (dots, convolutions, elementwise chains,
//! reductions, loops), in which element types, and the shape of its largest
//! dot and convolution. Read from the module as `jax.jit(f).lower(...)`
//! gives it, before XLA's passes. Sizes enter as `log2(1 + x)`.

use hlo::{ArrayShape, InstId, Module, Opcode, PrimType, Shape};

use super::contractions::{array, lg, ConvGemm};

/// The names of [`program_features`]' columns, in order.
pub const FEATURE_NAMES: [&str; 32] = [
    "dot_flops_f32",
    "dot_flops_bf16",
    "dot_flops_other",
    "conv_flops_f32",
    "conv_flops_bf16",
    "dots",
    "convolutions",
    "big_dot_m",
    "big_dot_n",
    "big_dot_k",
    "big_dot_batch",
    "big_dot_intensity",
    "narrow_dot_flops_share",
    "depthwise_conv_flops_share",
    "big_conv_output_pixels",
    "big_conv_input_features",
    "big_conv_output_features",
    "big_conv_window",
    "eltwise_elems_f32",
    "eltwise_elems_bf16",
    "transcendental_elems",
    "reduce_input_elems",
    "reduces",
    "while_loops",
    "loop_flops_share",
    "transpose_copy_elems",
    "gather_scatter_elems",
    "parameter_bytes",
    "result_bytes",
    "instructions",
    "bf16_flops_share",
    "broadcast_elems",
];

/// Number of program features.
pub const NUM_FEATURES: usize = FEATURE_NAMES.len();

fn elems(a: &ArrayShape) -> f64 {
    a.dims.iter().map(|&d| d.max(0) as f64).product()
}

fn bytes(s: &Shape) -> f64 {
    match s {
        Shape::Array(a) => elems(a) * f64::from(a.elem.byte_size()),
        Shape::Tuple(_) => 0.0, // a tuple's leaves are counted where they are made
        _ => 0.0,
    }
}

fn is_transcendental(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Exponential
            | Opcode::ExponentialMinusOne
            | Opcode::Log
            | Opcode::LogPlusOne
            | Opcode::Logistic
            | Opcode::Tanh
            | Opcode::Rsqrt
            | Opcode::Sqrt
            | Opcode::Cbrt
            | Opcode::Power
            | Opcode::Sine
            | Opcode::Cosine
            | Opcode::Tan
            | Opcode::Atan2
            | Opcode::Erf
    )
}

/// A dot's sizes: batch, M, N, K (products of its dimension groups).
#[derive(Clone, Copy, Debug, Default)]
struct DotSize {
    batch: f64,
    m: f64,
    n: f64,
    k: f64,
}

fn dot_size(m: &Module, id: InstId) -> Option<DotSize> {
    let d = m.inst(id);
    let dims = d.dot_dims().ok().flatten().unwrap_or_default();
    let lhs = array(m, *d.operands.first()?)?;
    let rhs = array(m, *d.operands.get(1)?)?;
    let prod = |a: &ArrayShape, pick: &dyn Fn(i64) -> bool| -> f64 {
        (0..a.dims.len() as i64)
            .filter(|&i| pick(i))
            .map(|i| a.dims[i as usize].max(0) as f64)
            .product()
    };
    Some(DotSize {
        batch: prod(lhs, &|i| dims.lhs_batch.contains(&i)),
        m: prod(lhs, &|i| {
            !dims.lhs_batch.contains(&i) && !dims.lhs_contracting.contains(&i)
        }),
        n: prod(rhs, &|i| {
            !dims.rhs_batch.contains(&i) && !dims.rhs_contracting.contains(&i)
        }),
        k: prod(lhs, &|i| dims.lhs_contracting.contains(&i)),
    })
}

/// A convolution's flops (2 per multiply-add), output pixels (batch times
/// spatial), input features per group, output features, window size and
/// whether it is grouped (depthwise and the like).
fn conv_size(m: &Module, id: InstId) -> Option<(f64, [f64; 4], bool)> {
    let g = ConvGemm::of(m, id)?;
    Some((
        g.flops(),
        [g.pixels, g.in_per_group, g.out_features, g.window],
        g.groups > 1.0,
    ))
}

/// Computations reached from the entry through `while` bodies and
/// conditions (their work runs once per iteration).
fn loop_computations(m: &Module) -> Vec<bool> {
    let mut in_loop = vec![false; m.num_computations()];
    let mut stack = Vec::new();
    for id in m.all_instructions() {
        if m.inst(id).opcode == Opcode::While {
            stack.extend(m.inst(id).called_computations());
        }
    }
    while let Some(c) = stack.pop() {
        if std::mem::replace(&mut in_loop[c.index()], true) {
            continue;
        }
        for &i in &m.comp(c).order {
            stack.extend(m.inst(i).called_computations());
        }
    }
    in_loop
}

/// The features of module `m` ([`FEATURE_NAMES`]).
pub fn program_features(m: &Module) -> [f64; NUM_FEATURES] {
    let in_loop = loop_computations(m);
    let mut dot_flops = [0.0f64; 3];
    let mut conv_flops = [0.0f64; 2];
    let (mut dots, mut convs, mut reduces, mut whiles, mut count) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let (mut narrow, mut depthwise, mut loop_flops) = (0.0, 0.0, 0.0);
    let mut big_dot: Option<(f64, DotSize, f64)> = None;
    let mut big_conv: Option<(f64, [f64; 4])> = None;
    let mut eltwise = [0.0f64; 2];
    let (mut transc, mut reduce_in, mut moves, mut gathers, mut bcast) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for comp in m.computations() {
        let looped = in_loop[comp.index()];
        for &id in &m.comp(comp).order {
            let inst = m.inst(id);
            count += 1.0;
            let Some(out) = array(m, id) else {
                if inst.opcode == Opcode::While {
                    whiles += 1.0;
                }
                continue;
            };
            let n = elems(out);
            let bf16 = out.elem == PrimType::Bf16;
            match inst.opcode {
                Opcode::Dot => {
                    let Some(s) = dot_size(m, id) else { continue };
                    let flops = 2.0 * s.batch * s.m * s.n * s.k;
                    let ty = inst
                        .operands
                        .first()
                        .and_then(|&o| array(m, o))
                        .map(|a| a.elem);
                    dot_flops[match ty {
                        Some(PrimType::F32) => 0,
                        Some(PrimType::Bf16) => 1,
                        _ => 2,
                    }] += flops;
                    dots += 1.0;
                    if s.m.min(s.n) <= 16.0 {
                        narrow += flops;
                    }
                    if looped {
                        loop_flops += flops;
                    }
                    let moved: f64 = inst
                        .operands
                        .iter()
                        .map(|&o| bytes(m.inst_shape(o)))
                        .sum::<f64>()
                        + bytes(m.inst_shape(id));
                    if big_dot.is_none_or(|(f, _, _)| flops > f) {
                        big_dot = Some((flops, s, flops / moved.max(1.0)));
                    }
                }
                Opcode::Convolution => {
                    let Some((flops, size, grouped)) = conv_size(m, id) else {
                        continue;
                    };
                    conv_flops[usize::from(bf16)] += flops;
                    convs += 1.0;
                    if grouped {
                        depthwise += flops;
                    }
                    if looped {
                        loop_flops += flops;
                    }
                    if big_conv.is_none_or(|(f, _)| flops > f) {
                        big_conv = Some((flops, size));
                    }
                }
                Opcode::Reduce | Opcode::ReduceWindow => {
                    reduces += 1.0;
                    reduce_in += inst
                        .operands
                        .first()
                        .and_then(|&o| array(m, o))
                        .map_or(0.0, elems);
                }
                Opcode::Transpose | Opcode::Copy => moves += n,
                Opcode::Gather
                | Opcode::Scatter
                | Opcode::DynamicSlice
                | Opcode::DynamicUpdateSlice => gathers += n,
                Opcode::Broadcast => bcast += n,
                op if op.is_elementwise() => {
                    eltwise[usize::from(bf16)] += n;
                    if is_transcendental(op) {
                        transc += n;
                    }
                }
                _ => {}
            }
        }
    }
    let entry = m.entry_computation();
    let params: f64 = entry.params.iter().map(|&p| bytes(m.inst_shape(p))).sum();
    let result = bytes(m.inst_shape(entry.root));
    let flops = dot_flops.iter().sum::<f64>() + conv_flops.iter().sum::<f64>();
    let share = |x: f64| if flops > 0.0 { x / flops } else { 0.0 };
    let (_, d, intensity) = big_dot.unwrap_or_default();
    let (_, c) = big_conv.unwrap_or_default();
    [
        lg(dot_flops[0]),
        lg(dot_flops[1]),
        lg(dot_flops[2]),
        lg(conv_flops[0]),
        lg(conv_flops[1]),
        lg(dots),
        lg(convs),
        lg(d.m),
        lg(d.n),
        lg(d.k),
        lg(d.batch),
        lg(intensity),
        share(narrow),
        share(depthwise),
        lg(c[0]),
        lg(c[1]),
        lg(c[2]),
        lg(c[3]),
        lg(eltwise[0]),
        lg(eltwise[1]),
        lg(transc),
        lg(reduce_in),
        lg(reduces),
        lg(whiles),
        share(loop_flops),
        lg(moves),
        lg(gathers),
        lg(params),
        lg(result),
        lg(count),
        share(dot_flops[1] + conv_flops[1]),
        lg(bcast),
    ]
}

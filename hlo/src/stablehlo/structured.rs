//! The StableHLO ops with attributes or regions: each decodes what HLO
//! needs (dimensions, windows, dimension numbers, called computations) and
//! writes the instruction XLA's conversion writes; `stablehlo.while` tuples
//! its operands the way XLA's exporter does, and `case` / `if` hand each
//! branch the values it captures.

use super::attr;
use super::lower::{bind_groups, Comp, Emitter, Val};
use super::syntax::{Block, Dims, Op, Ty, Use};
use crate::ir::hash::FxSet;
use crate::Result;

impl<'a> Emitter<'a> {
    /// The ops of [`Emitter::op`] that are not in its table.
    pub fn with_attrs(
        &mut self,
        c: &mut Comp<'a>,
        op: &Op<'a>,
        args: &[Val<'a>],
        short: &str,
    ) -> Result<()> {
        if self.is_identity(op, args, short)? {
            bind_groups(c, op, vec![args[0].clone()]);
            return Ok(());
        }
        if short == "iota" {
            return self.iota(c, op);
        }
        if short == "all_to_all" {
            return self.all_to_all(c, op, args);
        }
        if short == "transpose" {
            return self.transpose(c, op, args);
        }
        let ints = |k: &str| -> Result<String> { Ok(attr::join(&self.attr_ints(op, k)?)) };
        let attrs = match short {
            "reverse" => format!("dimensions={{{}}}", ints("dimensions")?),
            "concatenate" => format!("dimensions={{{}}}", self.int(op, "dimension")?),
            "dynamic_slice" => format!("dynamic_slice_sizes={{{}}}", ints("slice_sizes")?),
            "slice" => self.slice(op)?,
            "pad" => self.pad(op)?,
            "dot_general" => self.dot(op)?,
            "convolution" => self.conv(op, args)?,
            "compare" => self.compare(op)?,
            "gather" => self.gather(op)?,
            "all_gather" => format!(
                "{}, dimensions={{{}}}",
                self.collective(op)?,
                self.int(op, "all_gather_dim")?
            ),
            "collective_permute" => self.permute(op)?,
            "reduce" | "reduce_window" | "select_and_scatter" | "scatter" | "sort"
            | "all_reduce" | "reduce_scatter" => return self.with_regions(c, op, args, short),
            "custom_call" => {
                let target = op.attr("call_target_name").unwrap_or("\"\"");
                return self.multi(
                    c,
                    op,
                    args,
                    "custom-call",
                    format!("custom_call_target={target}"),
                    false,
                );
            }
            "get_tuple_element" => format!("index={}", self.int(op, "index")?),
            "reduce_precision" => format!(
                "exponent_bits={}, mantissa_bits={}",
                self.int(op, "exponent_bits")?,
                self.int(op, "mantissa_bits")?
            ),
            "fft" => {
                let kind = op
                    .attr("fft_type")
                    .and_then(attr::enum_word)
                    .ok_or_else(|| self.err(op.at, "fft needs `fft_type`"))?;
                format!("fft_type={kind}, fft_length={{{}}}", ints("fft_length")?)
            }
            "tuple" => String::new(),
            _ => return Err(self.err(op.at, format!("unsupported op {}", op.name))),
        };
        let opcode = match short {
            "dot_general" => "dot",
            "dynamic_slice" => "dynamic-slice",
            "get_tuple_element" => "get-tuple-element",
            "reduce_precision" => "reduce-precision",
            "all_gather" => "all-gather",
            "collective_permute" => "collective-permute",
            o => o,
        };
        self.one(c, op, args, opcode, attrs)
    }

    /// Whether MLIR's folder drops `op` as an identity (a pad by nothing, a
    /// slice of everything, a transpose in order, a one-operand
    /// concatenate): then it is its first operand.
    fn is_identity(&self, op: &Op<'a>, args: &[Val<'a>], short: &str) -> Result<bool> {
        let Some(x) = args.first() else {
            return Ok(false);
        };
        let same_type = op.outputs.first() == Some(&x.ty);
        Ok(same_type
            && match short {
                "pad" => ["edge_padding_low", "edge_padding_high", "interior_padding"]
                    .iter()
                    .all(|k| {
                        self.attr_ints(op, k)
                            .is_ok_and(|v| v.iter().all(|&p| p == 0))
                    }),
                "slice" => self
                    .attr_ints(op, "strides")
                    .is_ok_and(|v| v.iter().all(|&s| s == 1)),
                "transpose" => self
                    .attr_ints(op, "permutation")
                    .is_ok_and(|p| p.iter().enumerate().all(|(i, &d)| d == i as i64)),
                "concatenate" => args.len() == 1,
                _ => false,
            })
    }

    /// A transpose; of a transpose whose permutation it undoes, MLIR's
    /// folder makes it the inner transpose's operand.
    fn transpose(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        let perm = self.attr_ints(op, "permutation")?;
        let x = args
            .first()
            .ok_or_else(|| self.err(op.at, "transpose needs an operand"))?;
        if let Some((inner, first)) = c.transposes.get(&x.name) {
            let undone = perm.len() == first.len()
                && perm.iter().enumerate().all(|(i, &d)| {
                    usize::try_from(d).is_ok_and(|d| first.get(d) == Some(&(i as i64)))
                });
            if undone && op.outputs.first() == Some(&inner.ty) {
                bind_groups(c, op, vec![inner.clone()]);
                return Ok(());
            }
        }
        let attrs = format!("dimensions={{{}}}", attr::join(&perm));
        self.one(c, op, args, "transpose", attrs)?;
        if let Some((name, _)) = op.results.first() {
            let out = self.get(c, &Use { name, index: 0 }, op.at)?;
            c.transposes.insert(out.name, (x.clone(), perm));
        }
        Ok(())
    }

    /// `all_to_all` of one operand as XLA's exporter writes it: an
    /// `all-to-all` that splits `split_dimension`. When the pieces are
    /// concatenated along another dimension, XlaBuilder then reshapes the
    /// split dimension into (pieces, piece), moves the pieces' dimension
    /// before the concatenated one, and reshapes to the result; it also
    /// leaves a constant of the split count, unused, which XLA keeps.
    fn all_to_all(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        let [x] = args else {
            return Err(self.err(op.at, "all_to_all of several operands is not read"));
        };
        let (split, concat) = (
            self.int(op, "split_dimension")?,
            self.int(op, "concat_dimension")?,
        );
        let count = self.int(op, "split_count")?;
        let attrs = format!("{}, dimensions={{{split}}}", self.collective(op)?);
        if split == concat {
            return self.one(c, op, args, "all-to-all", attrs);
        }
        let (Ty::Tensor(dims, elem), Some(out)) = (&x.ty, op.outputs.first()) else {
            return Err(self.err(op.at, "all_to_all of a non-tensor"));
        };
        let rank = dims.len();
        let (Ok(split), Ok(concat)) = (usize::try_from(split), usize::try_from(concat)) else {
            return Err(self.err(op.at, "all_to_all dimensions out of range"));
        };
        if split >= rank || concat >= rank || count <= 0 || dims[split] % count != 0 {
            return Err(self.err(op.at, "all_to_all dimensions out of range"));
        }
        let count_ty = Ty::Tensor(Dims::from_slice(&[1]), "i32");
        self.fresh_constant(c, &count_ty, &format!("{{{count}}}"))?;
        if let Some(line) = c.lines.last_mut() {
            line.removable = false;
        }
        let a = self.push(c, &x.ty, "all-to-all", &[x], &attrs, false)?;
        let (pieces, perm) = split_pieces(dims, split, concat, count);
        let moved: Dims = perm.iter().map(|&p| pieces[p as usize]).collect();
        let r = self.push(c, &Ty::Tensor(pieces, elem), "reshape", &[&a], "", false)?;
        let t = self.push(
            c,
            &Ty::Tensor(moved, elem),
            "transpose",
            &[&r],
            &format!("dimensions={{{}}}", attr::join(&perm)),
            false,
        )?;
        let v = self.push(c, out, "reshape", &[&t], "", false)?;
        bind_groups(c, op, vec![v]);
        Ok(())
    }

    /// An iota of rank > 1 is XlaBuilder's: a 1-D iota and a broadcast, or
    /// a reshape when the other dimensions are all 1.
    fn iota(&mut self, c: &mut Comp<'a>, op: &Op<'a>) -> Result<()> {
        let dim = self.int(op, "iota_dimension")?;
        let ty = op
            .outputs
            .first()
            .cloned()
            .ok_or_else(|| self.err(op.at, "iota needs a result type"))?;
        let Ty::Tensor(dims, elem) = &ty else {
            return Err(self.err(op.at, "iota of a non-tensor"));
        };
        let size = *dims
            .get(dim as usize)
            .ok_or_else(|| self.err(op.at, "iota_dimension out of range"))?;
        if dims.len() <= 1 {
            let v = self.push(c, &ty, "iota", &[], &format!("iota_dimension={dim}"), false)?;
            bind_groups(c, op, vec![v]);
            return Ok(());
        }
        let line = Ty::Tensor(Dims::from_slice(&[size]), elem);
        let i = self.push(c, &line, "iota", &[], "iota_dimension=0", false)?;
        let only_ones = dims
            .iter()
            .enumerate()
            .all(|(d, &n)| d == dim as usize || n == 1);
        let v = if only_ones {
            self.push(c, &ty, "reshape", &[&i], "", false)?
        } else {
            self.push(
                c,
                &ty,
                "broadcast",
                &[&i],
                &format!("dimensions={{{dim}}}"),
                false,
            )?
        };
        bind_groups(c, op, vec![v]);
        Ok(())
    }

    pub(super) fn int(&self, op: &Op<'a>, key: &str) -> Result<i64> {
        op.attr(key)
            .and_then(attr::int)
            .ok_or_else(|| self.err(op.at, format!("{} needs an integer `{key}`", op.name)))
    }

    fn slice(&self, op: &Op<'a>) -> Result<String> {
        let (s, l) = (
            self.attr_ints(op, "start_indices")?,
            self.attr_ints(op, "limit_indices")?,
        );
        let st = self.attr_ints(op, "strides")?;
        let parts: Vec<String> = s
            .iter()
            .zip(&l)
            .zip(&st)
            .map(|((a, b), k)| {
                if *k == 1 {
                    format!("[{a}:{b}]")
                } else {
                    format!("[{a}:{b}:{k}]")
                }
            })
            .collect();
        Ok(format!("slice={{{}}}", parts.join(", ")))
    }

    fn pad(&self, op: &Op<'a>) -> Result<String> {
        let lo = self.attr_ints(op, "edge_padding_low")?;
        let hi = self.attr_ints(op, "edge_padding_high")?;
        let inner = self.attr_ints(op, "interior_padding")?;
        let parts: Vec<String> = (0..lo.len())
            .map(|i| {
                format!(
                    "{}_{}_{}",
                    lo[i],
                    hi.get(i).unwrap_or(&0),
                    inner.get(i).unwrap_or(&0)
                )
            })
            .collect();
        Ok(format!("padding={}", parts.join("x")))
    }

    fn dot(&self, op: &Op<'a>) -> Result<String> {
        let s = op.attr("dot_dimension_numbers").unwrap_or("");
        attr::dot_dims(s)
            .ok_or_else(|| self.err(op.at, format!("cannot read dot dimension numbers {s}")))
    }

    fn compare(&self, op: &Op<'a>) -> Result<String> {
        let dir = op
            .attr("comparison_direction")
            .and_then(attr::enum_word)
            .ok_or_else(|| self.err(op.at, "compare needs `comparison_direction`"))?;
        Ok(format!("direction={dir}"))
    }

    /// `window={size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=..}` of
    /// `rank` dimensions; absent attributes take their defaults.
    fn window(&self, op: &Op<'a>, size: Vec<i64>, keys: [&str; 4]) -> Result<String> {
        let rank = size.len();
        let get = |k: &str, dflt: i64| -> Result<Vec<i64>> {
            match op.attr(k) {
                Some(_) => self.attr_ints(op, k),
                None => Ok(vec![dflt; rank]),
            }
        };
        let stride = get(keys[0], 1)?;
        let mut pad = get("padding", 0)?;
        if pad.len() == 1 {
            pad = vec![pad[0]; 2 * rank];
        }
        let (lhs, rhs) = (get(keys[1], 1)?, get(keys[2], 1)?);
        let x = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join("x");
        let pads: Vec<String> = (0..rank)
            .map(|i| {
                format!(
                    "{}_{}",
                    pad.get(2 * i).unwrap_or(&0),
                    pad.get(2 * i + 1).unwrap_or(&0)
                )
            })
            .collect();
        let mut w = format!(
            "size={} stride={} pad={}",
            x(&size),
            x(&stride),
            pads.join("x")
        );
        if lhs.iter().any(|&d| d != 1) {
            w.push_str(&format!(" lhs_dilate={}", x(&lhs)));
        }
        if rhs.iter().any(|&d| d != 1) {
            w.push_str(&format!(" rhs_dilate={}", x(&rhs)));
        }
        if op.attr(keys[3]).is_some_and(|r| r.contains("true")) {
            w.push_str(&format!(" rhs_reversal={}", x(&vec![1; rank])));
        }
        Ok(format!("window={{{w}}}"))
    }

    fn conv(&self, op: &Op<'a>, args: &[Val<'a>]) -> Result<String> {
        let dn = op.attr("dimension_numbers").unwrap_or("");
        let labels = attr::conv_labels(dn)
            .ok_or_else(|| self.err(op.at, format!("cannot read convolution dimensions {dn}")))?;
        let rhs_labels = labels
            .split('_')
            .nth(1)
            .and_then(|s| s.split("->").next())
            .unwrap_or("");
        let Some(Val {
            ty: Ty::Tensor(rhs, _),
            ..
        }) = args.get(1)
        else {
            return Err(self.err(op.at, "convolution needs a tensor kernel"));
        };
        let mut size = Vec::new();
        for d in 0.. {
            let Some(pos) = rhs_labels.chars().position(|ch| ch.to_digit(10) == Some(d)) else {
                break;
            };
            size.push(rhs.get(pos).copied().unwrap_or(1));
        }
        let window = if size.is_empty() {
            String::new()
        } else {
            format!(
                "{}, ",
                self.window(
                    op,
                    size,
                    [
                        "window_strides",
                        "lhs_dilation",
                        "rhs_dilation",
                        "window_reversal"
                    ]
                )?
            )
        };
        let fg = op
            .attr("feature_group_count")
            .and_then(attr::int)
            .unwrap_or(1);
        let bg = op
            .attr("batch_group_count")
            .and_then(attr::int)
            .unwrap_or(1);
        let mut s = format!("{window}dim_labels={labels}");
        if fg != 1 {
            s.push_str(&format!(", feature_group_count={fg}"));
        }
        if bg != 1 {
            s.push_str(&format!(", batch_group_count={bg}"));
        }
        Ok(s)
    }

    fn gather(&self, op: &Op<'a>) -> Result<String> {
        let dn = op.attr("dimension_numbers").unwrap_or("");
        let mut parts = Vec::new();
        for (k, h) in [
            ("offset_dims", "offset_dims"),
            ("collapsed_slice_dims", "collapsed_slice_dims"),
            ("operand_batching_dims", "operand_batching_dims"),
            ("start_indices_batching_dims", "start_indices_batching_dims"),
            ("start_index_map", "start_index_map"),
        ] {
            if let Some(v) = attr::list_field(dn, k) {
                parts.push(format!("{h}={{{}}}", attr::join(&v)));
            } else if k == "offset_dims" || k == "collapsed_slice_dims" || k == "start_index_map" {
                parts.push(format!("{h}={{}}"));
            }
        }
        // MLIR leaves out an index_vector_dim of 0.
        let ivd = attr::int_field(dn, "index_vector_dim").unwrap_or(0);
        parts.push(format!("index_vector_dim={ivd}"));
        parts.push(format!(
            "slice_sizes={{{}}}",
            attr::join(&self.attr_ints(op, "slice_sizes")?)
        ));
        Ok(parts.join(", "))
    }

    fn scatter_dims(&self, op: &Op<'a>) -> Result<String> {
        let dn = op.attr("scatter_dimension_numbers").unwrap_or("");
        let mut parts = Vec::new();
        for k in [
            "update_window_dims",
            "inserted_window_dims",
            "input_batching_dims",
            "scatter_indices_batching_dims",
            "scatter_dims_to_operand_dims",
        ] {
            match attr::list_field(dn, k) {
                Some(v) => parts.push(format!("{k}={{{}}}", attr::join(&v))),
                None if k.starts_with("input") || k.starts_with("scatter_indices") => {}
                None => parts.push(format!("{k}={{}}")),
            }
        }
        // MLIR leaves out an index_vector_dim of 0.
        let ivd = attr::int_field(dn, "index_vector_dim").unwrap_or(0);
        parts.push(format!("index_vector_dim={ivd}"));
        Ok(parts.join(", "))
    }

    /// `channel_id`, `replica_groups` and `use_global_device_ids` of a
    /// collective as XLA's exporter writes them.
    fn collective(&self, op: &Op<'a>) -> Result<String> {
        let mut parts = Vec::new();
        parts.extend(channel(op));
        let text = op
            .attr("replica_groups")
            .unwrap_or("dense<> : tensor<0x0xi64>");
        let groups = if text.starts_with("#stablehlo.replica_group_mesh_axes<") {
            self.mesh_groups(text)
        } else {
            dense_groups(text)
        }
        .ok_or_else(|| self.err(op.at, format!("cannot read replica groups {text}")))?;
        parts.push(format!("replica_groups={{{}}}", groups.join(",")));
        if op.attr("use_global_device_ids").is_some() {
            parts.push("use_global_device_ids=true".into());
        }
        Ok(parts.join(", "))
    }

    /// `collective_permute`: its channel and source-target pairs.
    fn permute(&self, op: &Op<'a>) -> Result<String> {
        let text = op.attr("source_target_pairs").unwrap_or("");
        let pairs = dense_groups(text)
            .ok_or_else(|| self.err(op.at, format!("cannot read source-target pairs {text}")))?;
        let mut parts: Vec<String> = channel(op).into_iter().collect();
        parts.push(format!("source_target_pairs={{{}}}", pairs.join(",")));
        Ok(parts.join(", "))
    }

    /// The replica groups that `#stablehlo.replica_group_mesh_axes<mesh =
    /// @m, axes = [...]>` names, written out: one group per position of the
    /// mesh's other axes (row-major), each holding the devices along the
    /// named axes. None for what is not read (sub-axes, an unknown mesh or
    /// axis).
    fn mesh_groups(&self, text: &str) -> Option<Vec<String>> {
        if text.contains("sub_axis") {
            return None;
        }
        let sym = text
            .split("mesh = @")
            .nth(1)?
            .split([',', '>'])
            .next()?
            .trim();
        let mesh = *self.meshes.get(sym)?;
        // #sdy.mesh<["x"=2, "y"=2]> or #sdy.mesh<["x"=4], device_ids=[3, 2, 1, 0]>
        let axes_text = mesh.split_once('[')?.1.split_once(']')?.0;
        let (mut names, mut sizes) = (Vec::new(), Vec::new());
        for a in axes_text.split(',').filter(|a| !a.trim().is_empty()) {
            let (n, size) = a.split_once('=')?;
            names.push(n.trim().trim_matches('"'));
            sizes.push(size.trim().parse::<usize>().ok()?);
        }
        let total: usize = sizes.iter().product();
        let ids = match mesh.split_once("device_ids=") {
            Some((_, rest)) => attr::ints(rest.split_once(']')?.0.trim_start_matches('['))?,
            None => (0..total as i64).collect(),
        };
        if ids.len() != total {
            return None;
        }
        let group: Vec<usize> = text
            .split("name = \"")
            .skip(1)
            .map(|r| {
                r.split('"')
                    .next()
                    .and_then(|n| names.iter().position(|m| *m == n))
            })
            .collect::<Option<_>>()?;
        let others: Vec<usize> = (0..names.len()).filter(|i| !group.contains(i)).collect();
        // Each position of `axes`, row-major, as one index per axis.
        let each = |axes: &[usize]| -> Vec<Vec<usize>> {
            let n: usize = axes.iter().map(|&a| sizes[a]).product();
            (0..n)
                .map(|mut k| {
                    let mut at = vec![0; axes.len()];
                    for (j, &a) in axes.iter().enumerate().rev() {
                        at[j] = k % sizes[a];
                        k /= sizes[a];
                    }
                    at
                })
                .collect()
        };
        let mut out = Vec::new();
        for o in each(&others) {
            let mut members = Vec::new();
            for g in each(&group) {
                let mut pos = vec![0; names.len()];
                for (&a, &i) in others.iter().zip(&o).chain(group.iter().zip(&g)) {
                    pos[a] = i;
                }
                let linear = pos.iter().zip(&sizes).fold(0, |acc, (p, s)| acc * s + p);
                members.push(ids[linear]);
            }
            out.push(format!("{{{}}}", attr::join(&members)));
        }
        Some(out)
    }

    /// reduce, reduce_window, select_and_scatter, scatter, sort,
    /// all_reduce and reduce_scatter: their regions become computations
    /// with scalar parameters.
    fn with_regions(
        &mut self,
        c: &mut Comp<'a>,
        op: &Op<'a>,
        args: &[Val<'a>],
        short: &str,
    ) -> Result<()> {
        let first = self.region(op, 0, false)?;
        let (opcode, attrs) = match short {
            "reduce" => (
                "reduce",
                format!(
                    "dimensions={{{}}}, to_apply={first}",
                    attr::join(&self.attr_ints(op, "dimensions")?)
                ),
            ),
            "reduce_window" => {
                let size = self.attr_ints(op, "window_dimensions")?;
                let w = self.window(
                    op,
                    size,
                    ["window_strides", "base_dilations", "window_dilations", "-"],
                )?;
                ("reduce-window", format!("{w}, to_apply={first}"))
            }
            "select_and_scatter" => {
                let scatter = self.region(op, 1, false)?;
                let size = self.attr_ints(op, "window_dimensions")?;
                let w = self.window(op, size, ["window_strides", "-", "-", "-"])?;
                (
                    "select-and-scatter",
                    format!("{w}, select={first}, scatter={scatter}"),
                )
            }
            "scatter" => (
                "scatter",
                format!("{}, to_apply={first}", self.scatter_dims(op)?),
            ),
            "all_reduce" => (
                "all-reduce",
                format!("{}, to_apply={first}", self.collective(op)?),
            ),
            "reduce_scatter" => (
                "reduce-scatter",
                format!(
                    "{}, dimensions={{{}}}, to_apply={first}",
                    self.collective(op)?,
                    self.int(op, "scatter_dimension")?
                ),
            ),
            _ => (
                "sort",
                format!(
                    "dimensions={{{}}}, to_apply={first}",
                    self.int(op, "dimension")?
                ),
            ),
        };
        self.multi(c, op, args, opcode, attrs, false)
    }

    /// `stablehlo.while`: XLA's exporter passes the operands as one tuple
    /// (loop-invariant ones, which the body returns unchanged, after the
    /// others, as MLIR's canonicalizer makes them implicit captures); each
    /// region reads every element through a `get-tuple-element`; only the
    /// loop-carried results are read back.
    pub fn while_loop(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        let (body, ret) = self.region_block(op, 1)?;
        let invariant: Vec<bool> = (0..args.len())
            .map(|i| {
                matches!((ret.operands.get(i), body.args.get(i)), (Some(r), Some((a, _))) if &r.name == a && r.index == 0)
            })
            .collect();
        let order: Vec<usize> = (0..args.len())
            .filter(|&i| !invariant[i])
            .chain((0..args.len()).filter(|&i| invariant[i]))
            .collect();
        let reordered = reorder_while(op, &order);
        let cond = self.region(&reordered, 0, true)?;
        let body_comp = self.region(&reordered, 1, true)?;
        let tys: Vec<Ty<'a>> = order.iter().map(|&i| args[i].ty.clone()).collect();
        let refs: Vec<&Val<'a>> = order.iter().map(|&i| &args[i]).collect();
        let ty = if tys.len() == 1 {
            tys[0].clone()
        } else {
            Ty::Tuple(tys)
        };
        let init = if refs.len() == 1 {
            refs[0].clone()
        } else {
            self.push(c, &ty, "tuple", &refs, "", false)?
        };
        let w = self.push(
            c,
            &ty,
            "while",
            &[&init],
            &format!("condition={cond}, body={body_comp}"),
            false,
        )?;
        let carried = order.iter().filter(|&&i| !invariant[i]).count();
        let mut results: Vec<Option<Val<'a>>> = vec![None; args.len()];
        if refs.len() == 1 {
            results[order[0]] = Some(w);
        } else if let Ty::Tuple(elems) = &w.ty {
            for (k, &i) in order.iter().enumerate().take(carried) {
                results[i] = Some(self.push(
                    c,
                    &elems[k],
                    "get-tuple-element",
                    &[&w],
                    &format!("index={k}"),
                    false,
                )?);
            }
        }
        let vals: Vec<Val<'a>> = results
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.unwrap_or_else(|| args[i].clone()))
            .collect();
        bind_groups(c, op, vals);
        Ok(())
    }

    /// `stablehlo.case` (an `i32` index) and `stablehlo.if` (a `pred`): a
    /// `conditional`. Their regions take no arguments and read values of
    /// the enclosing computation; XLA's exporter passes each branch those
    /// values as its operand (one value itself, several as a tuple, none as
    /// an empty tuple), in the order the branch first uses them.
    pub fn conditional(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        let index = args
            .first()
            .ok_or_else(|| self.err(op.at, format!("{} needs an operand", op.name)))?;
        let mut operands = vec![index.clone()];
        let mut branches = Vec::new();
        for region in &op.regions {
            let block = region
                .first()
                .ok_or_else(|| self.err(op.at, format!("{} with an empty branch", op.name)))?;
            let captured = captured_uses(block)
                .into_iter()
                .map(|u| {
                    let v = self.get(c, &u, op.at)?;
                    Ok((u, v))
                })
                .collect::<Result<Vec<_>>>()?;
            let operand = match captured.as_slice() {
                [(_, v)] => v.clone(),
                vs => {
                    let ty = Ty::Tuple(vs.iter().map(|(_, v)| v.ty.clone()).collect());
                    let refs: Vec<&Val<'a>> = vs.iter().map(|(_, v)| v).collect();
                    self.push(c, &ty, "tuple", &refs, "", false)?
                }
            };
            branches.push(self.branch(block, &captured, &operand.ty)?);
            operands.push(operand);
        }
        let attrs = match (op.name, branches.as_slice()) {
            ("stablehlo.if", [t, f]) => format!("true_computation={t}, false_computation={f}"),
            ("stablehlo.if", _) => return Err(self.err(op.at, "if needs two branches")),
            _ => format!("branch_computations={{{}}}", branches.join(", ")),
        };
        self.multi(c, op, &operands, "conditional", attrs, false)
    }
}

/// The values a region's `block` reads from outside it, each once, in the
/// order of their first use (nested regions included).
fn captured_uses<'a>(block: &Block<'a>) -> Vec<Use<'a>> {
    fn defined<'a>(block: &Block<'a>, out: &mut FxSet<&'a str>) {
        out.extend(block.args.iter().map(|(n, _)| *n));
        for op in &block.ops {
            out.extend(op.results.iter().map(|(n, _)| *n));
            op.regions.iter().flatten().for_each(|b| defined(b, out));
        }
    }
    fn used<'a>(
        block: &Block<'a>,
        inside: &FxSet<&'a str>,
        seen: &mut FxSet<(&'a str, usize)>,
        out: &mut Vec<Use<'a>>,
    ) {
        for op in &block.ops {
            for u in &op.operands {
                if !inside.contains(u.name) && seen.insert((u.name, u.index)) {
                    out.push(u.clone());
                }
            }
            op.regions
                .iter()
                .flatten()
                .for_each(|b| used(b, inside, seen, out));
        }
    }
    let mut inside = FxSet::default();
    defined(block, &mut inside);
    let mut out = Vec::new();
    used(block, &inside, &mut FxSet::default(), &mut out);
    out
}

/// `op` (a while) with its operands, block arguments and returned values
/// permuted by `order`.
fn reorder_while<'a>(op: &Op<'a>, order: &[usize]) -> Op<'a> {
    let mut out = op.clone();
    for region in &mut out.regions {
        for block in region.iter_mut() {
            if block.args.len() == order.len() {
                block.args = order.iter().map(|&i| block.args[i].clone()).collect();
            }
        }
    }
    if let Some(block) = out.regions.get_mut(1).and_then(|r| r.first_mut()) {
        if let Some(ret) = block.ops.last_mut() {
            if ret.operands.len() == order.len() {
                ret.operands = order.iter().map(|&i| ret.operands[i].clone()).collect();
            }
        }
    }
    out
}

/// XlaBuilder's shapes for an `all_to_all` that splits `split` into
/// `count` pieces and concatenates them along `concat`: the operand's
/// dimensions with `split` as (pieces, piece), and the permutation that
/// puts the pieces' dimension before `concat` (dimension i of the operand
/// is dimension i, or i + 1 from the split on, of the reshaped array).
fn split_pieces(dims: &[i64], split: usize, concat: usize, count: i64) -> (Dims, Vec<i64>) {
    let mut pieces = Dims::new();
    for (i, &d) in dims.iter().enumerate() {
        if i == split {
            pieces.extend([count, d / count]);
        } else {
            pieces.push(d);
        }
    }
    let mut perm = Vec::with_capacity(dims.len() + 1);
    for i in 0..dims.len() {
        if i == concat {
            perm.push(split as i64);
        }
        perm.push(if i >= split { i as i64 + 1 } else { i as i64 });
    }
    (pieces, perm)
}

/// `channel_id=H` of a collective whose channel handle is positive, as
/// XLA's exporter writes it.
fn channel(op: &Op<'_>) -> Option<String> {
    op.attr("channel_handle")
        .and_then(|s| attr::int_field(s, "handle"))
        .filter(|&h| h > 0)
        .map(|h| format!("channel_id={h}"))
}

/// Replica groups given as the rows of `dense<...> : tensor<GxN>` (a splat
/// repeated), written out.
fn dense_groups(text: &str) -> Option<Vec<String>> {
    let dims: Vec<usize> = text
        .rsplit_once("tensor<")?
        .1
        .strip_suffix('>')?
        .split('x')
        .filter_map(|d| d.parse().ok())
        .collect();
    let [rows, cols] = dims[..] else {
        return None;
    };
    let mut ids = attr::ints(text)?;
    if ids.len() == 1 && rows * cols != 1 {
        ids = vec![ids[0]; rows * cols];
    }
    if ids.len() != rows * cols {
        return None;
    }
    Some(
        ids.chunks(cols.max(1))
            .take(rows)
            .map(|g| format!("{{{}}}", attr::join(g)))
            .collect(),
    )
}

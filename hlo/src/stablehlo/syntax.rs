//! The generic-form MLIR syntax tree: ops with their results, operands,
//! attributes (name and balanced text, decoded later by `attr`), regions and
//! types. Built from the pest parse of `mlir.pest`; every op keeps its byte
//! offset so later errors can say `line:col`.

use pest::iterators::Pair;

use super::Rule;

/// An MLIR type as far as HLO needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// `tensor<4x64xf32>`: dimensions and the element type's MLIR name.
    Tensor(Vec<i64>, String),
    Tuple(Vec<Ty>),
    Token,
    /// Anything else, verbatim (an error if an op needs its shape).
    Other(String),
}

/// A use of a value: `%name` or `%name#index`.
#[derive(Clone, Debug)]
pub struct Use {
    pub name: String,
    pub index: usize,
}

#[derive(Clone, Debug)]
pub struct Block {
    pub args: Vec<(String, Ty)>,
    pub ops: Vec<Op>,
}

#[derive(Clone, Debug)]
pub struct Op {
    /// Byte offset of the op in the source.
    pub at: usize,
    /// `(name, number of results)` of each result group.
    pub results: Vec<(String, usize)>,
    pub name: String,
    pub operands: Vec<Use>,
    /// Properties and attributes together (`<{...}>` then `{...}`).
    pub attrs: Vec<(String, String)>,
    pub regions: Vec<Vec<Block>>,
    pub inputs: Vec<Ty>,
    pub outputs: Vec<Ty>,
}

impl Op {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

pub fn op(p: Pair<'_, Rule>) -> Op {
    let mut op = Op {
        at: p.as_span().start(),
        results: Vec::new(),
        name: String::new(),
        operands: Vec::new(),
        attrs: Vec::new(),
        regions: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
    };
    for part in p.into_inner() {
        match part.as_rule() {
            Rule::results => op.results = part.into_inner().map(result).collect(),
            Rule::op_name => op.name = part.as_str().trim_matches('"').to_string(),
            Rule::operands => op.operands = part.into_inner().map(value).collect(),
            Rule::props | Rule::attrs => op.attrs.extend(part.into_inner().flat_map(entries)),
            Rule::regions => op.regions = part.into_inner().map(region).collect(),
            Rule::fn_type => {
                let mut it = part.into_inner();
                op.inputs = it.next().map(types).unwrap_or_default();
                op.outputs = it.next().map(types).unwrap_or_default();
            }
            _ => {}
        }
    }
    op
}

fn result(p: Pair<'_, Rule>) -> (String, usize) {
    let mut it = p.into_inner();
    let name = it.next().map_or("", |i| i.as_str()).to_string();
    let n = it.next().and_then(|c| c.as_str().parse().ok()).unwrap_or(1);
    (name, n)
}

fn value(p: Pair<'_, Rule>) -> Use {
    let mut it = p.into_inner();
    let name = it.next().map_or("", |i| i.as_str()).to_string();
    let index = it.next().and_then(|c| c.as_str().parse().ok()).unwrap_or(0);
    Use { name, index }
}

fn entries(p: Pair<'_, Rule>) -> Vec<(String, String)> {
    p.into_inner()
        .map(|e| {
            let mut it = e.into_inner();
            let key = it.next().map_or("", |k| k.as_str()).trim_matches('"');
            let val = it.next().map_or("", |v| v.as_str()).trim();
            (key.to_string(), val.to_string())
        })
        .collect()
}

fn region(p: Pair<'_, Rule>) -> Vec<Block> {
    p.into_inner()
        .map(|b| {
            let mut block = Block {
                args: Vec::new(),
                ops: Vec::new(),
            };
            for part in b.into_inner() {
                match part.as_rule() {
                    Rule::block_head => {
                        block.args = part
                            .into_inner()
                            .filter(|a| a.as_rule() == Rule::block_arg)
                            .map(block_arg)
                            .collect();
                    }
                    Rule::op => block.ops.push(op(part)),
                    _ => {}
                }
            }
            block
        })
        .collect()
}

fn block_arg(p: Pair<'_, Rule>) -> (String, Ty) {
    let mut it = p.into_inner();
    let name = it.next().map(value).map(|u| u.name).unwrap_or_default();
    (name, it.next().map_or(Ty::Other(String::new()), ty))
}

fn types(p: Pair<'_, Rule>) -> Vec<Ty> {
    match p.as_rule() {
        Rule::type_list => p.into_inner().map(ty).collect(),
        _ => vec![ty(p)],
    }
}

pub fn ty(p: Pair<'_, Rule>) -> Ty {
    let text = p.as_str().to_string();
    let Some(inner) = p.into_inner().next() else {
        return Ty::Other(text);
    };
    match inner.as_rule() {
        Rule::tensor => {
            let mut dims = Vec::new();
            let mut elem = String::new();
            for part in inner.into_inner() {
                match part.as_rule() {
                    Rule::dim => dims.push(part.as_str().parse().unwrap_or(-1)),
                    Rule::elem => elem = part.as_str().to_string(),
                    _ => {}
                }
            }
            Ty::Tensor(dims, elem)
        }
        Rule::tuple => Ty::Tuple(inner.into_inner().map(ty).collect()),
        Rule::token => Ty::Token,
        _ => Ty::Other(text),
    }
}

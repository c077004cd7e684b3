//! The generic-form MLIR syntax tree: ops with their results, operands,
//! attributes (name and balanced text, decoded later by `attr`), regions and
//! types. Built from the pest parse of `mlir.pest`; every op keeps its byte
//! offset so later errors can say `line:col`. Names and texts borrow from
//! the source; `result`, `value` and `tensor` are read from their text (the
//! grammar has checked it) rather than through their inner pairs.

use pest::iterators::Pair;
use smallvec::SmallVec;

use super::Rule;

/// A tensor's dimensions (inline up to rank 4: values are cloned often).
pub type Dims = SmallVec<[i64; 4]>;

/// An MLIR type as far as HLO needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty<'a> {
    /// `tensor<4x64xf32>`: dimensions and the element type's MLIR name.
    Tensor(Dims, &'a str),
    Tuple(Vec<Ty<'a>>),
    Token,
    /// Anything else, verbatim (an error if an op needs its shape).
    Other(&'a str),
}

/// A use of a value: `%name` or `%name#index`.
#[derive(Clone, Debug)]
pub struct Use<'a> {
    pub name: &'a str,
    pub index: usize,
}

#[derive(Clone, Debug)]
pub struct Block<'a> {
    pub args: Vec<(&'a str, Ty<'a>)>,
    pub ops: Vec<Op<'a>>,
}

#[derive(Clone, Debug)]
pub struct Op<'a> {
    /// Byte offset of the op in the source.
    pub at: usize,
    /// `(name, number of results)` of each result group.
    pub results: Vec<(&'a str, usize)>,
    pub name: &'a str,
    pub operands: Vec<Use<'a>>,
    /// Properties and attributes together (`<{...}>` then `{...}`).
    pub attrs: Vec<(&'a str, &'a str)>,
    pub regions: Vec<Vec<Block<'a>>>,
    pub inputs: Vec<Ty<'a>>,
    pub outputs: Vec<Ty<'a>>,
}

impl<'a> Op<'a> {
    pub fn attr(&self, key: &str) -> Option<&'a str> {
        self.attrs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

pub fn op(p: Pair<'_, Rule>) -> Op<'_> {
    let mut op = Op {
        at: p.as_span().start(),
        results: Vec::new(),
        name: "",
        operands: Vec::new(),
        attrs: Vec::new(),
        regions: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
    };
    for part in p.into_inner() {
        match part.as_rule() {
            Rule::results => op.results = part.into_inner().map(|r| result(r.as_str())).collect(),
            Rule::op_name => op.name = part.as_str().trim_matches('"'),
            Rule::operands => op.operands = part.into_inner().map(|v| value(v.as_str())).collect(),
            Rule::props | Rule::attrs => {
                for entries in part.into_inner() {
                    op.attrs.extend(entries.into_inner().map(entry));
                }
            }
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

/// `%name` or `%name:count` (a count too large to read is 1).
fn result(text: &str) -> (&str, usize) {
    let text = text.strip_prefix('%').unwrap_or(text);
    match text.split_once(':') {
        Some((name, n)) => (name, n.parse().unwrap_or(1)),
        None => (text, 1),
    }
}

/// `%name` or `%name#index` (an index too large to read is 0).
fn value(text: &str) -> Use<'_> {
    let text = text.strip_prefix('%').unwrap_or(text);
    match text.split_once('#') {
        Some((name, i)) => Use {
            name,
            index: i.parse().unwrap_or(0),
        },
        None => Use {
            name: text,
            index: 0,
        },
    }
}

fn entry(e: Pair<'_, Rule>) -> (&str, &str) {
    let mut it = e.into_inner();
    let key = it.next().map_or("", |k| k.as_str()).trim_matches('"');
    let val = it.next().map_or("", |v| v.as_str()).trim();
    (key, val)
}

fn region(p: Pair<'_, Rule>) -> Vec<Block<'_>> {
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

fn block_arg(p: Pair<'_, Rule>) -> (&str, Ty<'_>) {
    let mut it = p.into_inner();
    let name = it.next().map_or("", |u| value(u.as_str()).name);
    (name, it.next().map_or(Ty::Other(""), ty))
}

fn types(p: Pair<'_, Rule>) -> Vec<Ty<'_>> {
    match p.as_rule() {
        Rule::type_list => p.into_inner().map(ty).collect(),
        _ => vec![ty(p)],
    }
}

pub fn ty(p: Pair<'_, Rule>) -> Ty<'_> {
    let text = p.as_str();
    let Some(inner) = p.into_inner().next() else {
        return Ty::Other(text);
    };
    match inner.as_rule() {
        Rule::tensor => tensor(inner.as_str()),
        Rule::tuple => Ty::Tuple(inner.into_inner().map(ty).collect()),
        Rule::token => Ty::Token,
        _ => Ty::Other(text),
    }
}

/// `tensor<4x?x64xf32, #enc>` as the grammar's `tensor` has read it:
/// dimensions (`?` and ones too large are -1), each followed by `x`, then
/// the element type (`complex<f32>` whole).
fn tensor(text: &str) -> Ty<'_> {
    let mut rest = text.strip_prefix("tensor<").unwrap_or(text);
    let mut dims = Dims::new();
    loop {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        let n = if n == 0 && rest.starts_with('?') {
            1
        } else {
            n
        };
        match rest.as_bytes().get(n) {
            Some(b'x') if n > 0 => {
                dims.push(rest[..n].parse().unwrap_or(-1));
                rest = &rest[n + 1..];
            }
            _ => break,
        }
    }
    let n = if rest.starts_with("complex<") {
        rest.find('>').map_or(rest.len(), |i| i + 1)
    } else {
        rest.bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count()
    };
    Ty::Tensor(dims, &rest[..n])
}

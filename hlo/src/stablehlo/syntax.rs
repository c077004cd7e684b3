//! The generic-form MLIR syntax tree, and its reader: ops with their
//! results, operands, attributes (name and balanced text, decoded later by
//! `attr`), regions and types. Every op keeps its byte offset so later
//! errors can say `line:col`. Names and texts borrow from the source.
//!
//! The generic form is small and regular: every op is
//!
//! ```text
//! %r:2 = "dialect.op"(%a, %b#1) <{props}> ({regions}) {attrs} : (types) -> types loc(...)
//! ```
//!
//! and a region is `{ ^bb0(%x: type, ...): op... }`. This reader is one
//! pass over the bytes with a cursor, one method per form. It replaced a
//! pest grammar (`mlir.pest`, until 29 Nov 2026) that spent about half of
//! a decision's read matching characters one call at a time: the HLO both
//! give is the same on the 950 modules compared (232 programs of the
//! corpus, held-out and unusual sets, each printed whole and with large
//! constants elided, by both jaxlibs, and testdata/stablehlo), and
//! `stablehlo_to_hlo_text` takes 2.7x less time. Whitespace and `//`
//! comments may stand between any two tokens, as the grammar allowed.

use smallvec::SmallVec;

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

/// Where the text stops being the generic form, and what was expected
/// there: a token (`token`) or a description.
#[derive(Debug)]
pub struct SyntaxError {
    pub at: usize,
    pub expected: &'static str,
    pub token: bool,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.token {
            write!(f, "expected `{}`", self.expected)
        } else {
            write!(f, "expected {}", self.expected)
        }
    }
}

type Parsed<T> = Result<T, SyntaxError>;

/// Reads a whole text: one op (the module), and nothing after it but
/// whitespace. Nesting depth is bounded by the caller (`check_depth`):
/// each level of recursion here is inside a bracket.
pub fn file(src: &str) -> Parsed<Op<'_>> {
    let mut c = Cursor {
        src,
        b: src.as_bytes(),
        i: 0,
    };
    c.space();
    let op = c.op()?;
    c.space();
    if c.i < c.b.len() {
        return c.fail("the end of the text after the module op");
    }
    Ok(op)
}

struct Cursor<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

impl<'a> Cursor<'a> {
    fn fail<T>(&self, expected: &'static str) -> Parsed<T> {
        Err(SyntaxError {
            at: self.i,
            expected,
            token: false,
        })
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at(&self, s: &str) -> bool {
        self.b[self.i..].starts_with(s.as_bytes())
    }

    /// Skips whitespace and `//` comments.
    fn space(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t'..=b'\r') => self.i += 1,
                Some(b'/') if self.b.get(self.i + 1) == Some(&b'/') => {
                    self.i = memchr::memchr(b'\n', &self.b[self.i..])
                        .map_or(self.b.len(), |n| self.i + n);
                }
                _ => return,
            }
        }
    }

    /// Skips whitespace, then takes `s` if it is next.
    fn eat(&mut self, s: &str) -> bool {
        self.space();
        let ok = self.at(s);
        if ok {
            self.i += s.len();
        }
        ok
    }

    fn expect(&mut self, s: &'static str) -> Parsed<()> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(SyntaxError {
                at: self.i,
                expected: s,
                token: true,
            })
        }
    }

    /// `item (, item)*`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Parsed<T>) -> Parsed<Vec<T>> {
        let mut out = vec![item(self)?];
        while self.eat(",") {
            out.push(item(self)?);
        }
        Ok(out)
    }

    /// `item (, item)*` or nothing, then `close` (its opener read).
    fn enclosed<T>(
        &mut self,
        close: &'static str,
        item: impl FnMut(&mut Self) -> Parsed<T>,
    ) -> Parsed<Vec<T>> {
        if self.eat(close) {
            return Ok(Vec::new());
        }
        let out = self.list(item)?;
        self.expect(close)?;
        Ok(out)
    }

    /// The run of bytes from here for which `f` holds (maybe empty).
    fn run(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        &self.src[start..self.i]
    }

    /// `"..."` without escapes (op names, quoted keys): the text inside.
    fn quoted(&mut self, what: &'static str) -> Parsed<&'a str> {
        if self.peek() != Some(b'"') {
            return self.fail(what);
        }
        let Some(n) = memchr::memchr(b'"', &self.b[self.i + 1..]) else {
            return self.fail("a closing `\"`");
        };
        let s = &self.src[self.i + 1..self.i + 1 + n];
        self.i += n + 2;
        Ok(s)
    }

    /// `%name`, `%name:count` (results) or `%name#index` (uses), after
    /// whitespace: the name and the number after `sep` (`default` where
    /// absent or too large to read).
    fn percent(&mut self, sep: u8, default: usize) -> Parsed<(&'a str, usize)> {
        self.space();
        if self.peek() != Some(b'%') {
            return self.fail("a value `%name`");
        }
        self.i += 1;
        let name = self.run(is_ident);
        if name.is_empty() {
            return self.fail("a value name after `%`");
        }
        // `%r : type` (a block argument) is not a count: the count is
        // written with no space.
        if self.peek() == Some(sep) && self.b.get(self.i + 1).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
            let n = self.run(|b| b.is_ascii_digit());
            return Ok((name, n.parse().unwrap_or(default)));
        }
        Ok((name, default))
    }

    fn value(&mut self) -> Parsed<Use<'a>> {
        let (name, index) = self.percent(b'#', 0)?;
        Ok(Use { name, index })
    }

    fn op(&mut self) -> Parsed<Op<'a>> {
        self.space();
        let mut op = Op {
            at: self.i,
            results: Vec::new(),
            name: "",
            operands: Vec::new(),
            attrs: Vec::new(),
            regions: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        };
        if self.peek() == Some(b'%') {
            op.results = self.list(|c| c.percent(b':', 1))?;
            self.expect("=")?;
            self.space();
        }
        op.name = self.quoted("an op name `\"dialect.op\"`")?;
        self.expect("(")?;
        op.operands = self.enclosed(")", Self::value)?;
        if self.eat("<{") {
            op.attrs = self.enclosed("}>", Self::entry)?;
        }
        if self.eat("(") {
            op.regions = self.list(Self::region)?;
            self.expect(")")?;
        }
        if self.eat("{") {
            let attrs = self.enclosed("}", Self::entry)?;
            op.attrs.extend(attrs);
        }
        self.expect(":")?;
        op.inputs = self.type_list()?;
        self.expect("->")?;
        self.space();
        op.outputs = if self.peek() == Some(b'(') {
            self.type_list()?
        } else {
            vec![self.ty()?]
        };
        self.loc()?;
        Ok(op)
    }

    /// `loc(...)`, if next.
    fn loc(&mut self) -> Parsed<()> {
        let before = self.i;
        self.space();
        if self.at("loc") && self.b.get(self.i + 3) == Some(&b'(') {
            self.i += 3;
            self.balanced()?;
        } else {
            self.i = before;
        }
        Ok(())
    }

    /// `key = value` or `key` (a unit attribute).
    fn entry(&mut self) -> Parsed<(&'a str, &'a str)> {
        self.space();
        let key = if self.peek() == Some(b'"') {
            self.quoted("an attribute name")?
        } else {
            self.run(is_ident)
        };
        if key.is_empty() {
            return self.fail("an attribute name");
        }
        if !self.eat("=") {
            return Ok((key, ""));
        }
        self.space();
        Ok((key, self.attr_value()?))
    }

    /// Balanced text up to the next `,` `}` `)` `]` or `>` outside
    /// brackets and strings (an `->` is text), without surrounding space.
    fn attr_value(&mut self) -> Parsed<&'a str> {
        let start = self.i;
        loop {
            match self.peek() {
                None | Some(b',' | b'}' | b')' | b']' | b'>') => break,
                Some(b'<' | b'[' | b'(' | b'{') => self.balanced()?,
                Some(b'"') => self.string()?,
                Some(b'-') if self.b.get(self.i + 1) == Some(&b'>') => self.i += 2,
                Some(_) => self.i += 1,
            }
        }
        let value = self.src[start..self.i].trim_end();
        if value.is_empty() {
            return self.fail("an attribute value");
        }
        Ok(value)
    }

    /// A bracketed group from its opening bracket to the matching close.
    fn balanced(&mut self) -> Parsed<()> {
        let mut stack: SmallVec<[u8; 16]> = SmallVec::new();
        loop {
            let Some(b) = self.peek() else {
                return self.fail("a closing bracket");
            };
            match b {
                b'<' => stack.push(b'>'),
                b'[' => stack.push(b']'),
                b'(' => stack.push(b')'),
                b'{' => stack.push(b'}'),
                b'>' | b']' | b')' | b'}' => {
                    if stack.pop() != Some(b) {
                        return self.fail("the matching closing bracket");
                    }
                    if stack.is_empty() {
                        self.i += 1;
                        return Ok(());
                    }
                }
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'-' if self.b.get(self.i + 1) == Some(&b'>') => self.i += 1,
                _ => {}
            }
            self.i += 1;
        }
    }

    /// A `"..."` string with `\` escapes, skipped.
    fn string(&mut self) -> Parsed<()> {
        let mut i = self.i + 1;
        while let Some(n) = self
            .b
            .get(i..)
            .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
        {
            if self.b[i + n] == b'"' {
                self.i = i + n + 1;
                return Ok(());
            }
            i += n + 2; // a `\` and the byte it escapes
        }
        self.fail("the end of a string")
    }

    /// `{ block* }`.
    fn region(&mut self) -> Parsed<Vec<Block<'a>>> {
        self.expect("{")?;
        let mut blocks = Vec::new();
        loop {
            if self.eat("}") {
                return Ok(blocks);
            }
            let mut block = Block {
                args: Vec::new(),
                ops: Vec::new(),
            };
            if self.eat("^") {
                if self.run(is_ident).is_empty() {
                    return self.fail("a block name after `^`");
                }
                if self.eat("(") {
                    block.args = self.enclosed(")", Self::block_arg)?;
                }
                self.expect(":")?;
            }
            loop {
                block.ops.push(self.op()?);
                self.space();
                if matches!(self.peek(), Some(b'}' | b'^')) {
                    break;
                }
            }
            blocks.push(block);
        }
    }

    /// `%x: type loc(...)`.
    fn block_arg(&mut self) -> Parsed<(&'a str, Ty<'a>)> {
        let arg = self.value()?;
        self.expect(":")?;
        let ty = self.ty()?;
        self.loc()?;
        Ok((arg.name, ty))
    }

    /// `( type, ... )`.
    fn type_list(&mut self) -> Parsed<Vec<Ty<'a>>> {
        self.expect("(")?;
        self.enclosed(")", Self::ty)
    }

    fn ty(&mut self) -> Parsed<Ty<'a>> {
        self.space();
        let start = self.i;
        if self.at("tensor<") {
            return self.tensor();
        }
        if self.at("tuple<") {
            self.i += "tuple<".len();
            return Ok(Ty::Tuple(self.enclosed(">", Self::ty)?));
        }
        if self.peek() == Some(b'!') {
            self.i += 1;
            if self
                .run(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
                .is_empty()
            {
                return self.fail("a dialect type after `!`");
            }
            let name = &self.src[start..self.i];
            if name == "!stablehlo.token" {
                return Ok(Ty::Token);
            }
            if matches!(self.peek(), Some(b'<' | b'[' | b'(' | b'{')) {
                self.balanced()?;
            }
            return Ok(Ty::Other(&self.src[start..self.i]));
        }
        if !self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            return self.fail("a type");
        }
        self.run(|b| b.is_ascii_alphanumeric());
        Ok(Ty::Other(&self.src[start..self.i]))
    }

    /// `tensor<4x?x64xf32, #enc>`: dimensions (`?` and ones too large are
    /// -1), each followed by `x`, then the element type (`complex<f32>`
    /// whole), then any encoding.
    fn tensor(&mut self) -> Parsed<Ty<'a>> {
        self.i += "tensor<".len();
        let mut dims = Dims::new();
        loop {
            let start = self.i;
            let n = if self.peek() == Some(b'?') {
                self.i += 1;
                -1
            } else {
                let digits = self.run(|b| b.is_ascii_digit());
                if digits.is_empty() {
                    break;
                }
                digits.parse().unwrap_or(-1)
            };
            if self.peek() != Some(b'x') {
                self.i = start; // an element type that starts with digits is no type
                break;
            }
            self.i += 1;
            dims.push(n);
        }
        let start = self.i;
        if self.at("complex<") {
            self.i += "complex<".len();
            if !self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
                return self.fail("a complex element type");
            }
            self.run(|b| b.is_ascii_alphanumeric());
            if self.peek() != Some(b'>') {
                return self.fail("`>` after a complex element type");
            }
            self.i += 1;
        } else {
            if !self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
                return self.fail("a tensor element type");
            }
            self.run(|b| b.is_ascii_alphanumeric() || b == b'_');
        }
        let elem = &self.src[start..self.i];
        if self.peek() == Some(b',') {
            // An encoding: balanced text up to the tensor's `>`.
            while let Some(b) = self.peek() {
                match b {
                    b'>' => break,
                    b'<' | b'[' | b'(' | b'{' => self.balanced()?,
                    b'"' => self.string()?,
                    _ => self.i += 1,
                }
            }
        }
        if self.peek() != Some(b'>') {
            return self.fail("`>` closing a tensor type");
        }
        self.i += 1;
        Ok(Ty::Tensor(dims, elem))
    }
}

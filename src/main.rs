//! `hlo-opt`: parse, verify, rewrite and print HLO modules.

fn main() {
    println!("hlo-opt: under construction");
}

//! `hlo-cost`: featurize modules and evaluate cost models on TpuGraphs npz files.

fn main() {
    println!("hlo-cost: under construction");
}

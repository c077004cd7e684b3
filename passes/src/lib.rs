//! `passes`: the pass manager and the cost-model-guided passes (layout
//! assignment, tile selection).

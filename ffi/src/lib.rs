//! The C ABI of hlo-opt (see `include/hlo_opt.h`).

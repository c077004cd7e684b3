//! Configuration features: the 18 layout config features of a configurable
//! node and the 24 tile config features of a kernel, as the dataset encodes
//! them (`FeaturizeLayoutConfig` in `tuning_data_iterator.cc`,
//! `FeaturizeTileSizeConfig` in `featurizers.h`).
//!
//! Invariants: a layout row is three slots of 6 (output, input, kernel), each
//! the tensor's minor-to-major order or a prefix of it, truncated to 6 and
//! padded with -1; a missing tensor (or the compiler's default choice) is all
//! -1. A tile row is kernel, output and input bounds, each 6 leading values
//! (0-padded), their sum and their product, the product of an empty list
//! being 0.

use crate::graph::{LAYOUT_CONFIG_DIM, TILE_CONFIG_DIM};

/// Values per tensor in a layout row.
pub const LAYOUT_SLOT: usize = 6;
/// The padding value of a layout row.
pub const LAYOUT_PAD: f32 = -1.0;

/// The 18 layout config features of one configurable node: `output`, `input`
/// and `kernel` minor-to-major orders (or prefixes of them), `None` for "the
/// compiler's default" (all -1).
pub fn layout_config_row(
    output: Option<&[i64]>,
    input: Option<&[i64]>,
    kernel: Option<&[i64]>,
) -> [f32; LAYOUT_CONFIG_DIM] {
    let mut row = [LAYOUT_PAD; LAYOUT_CONFIG_DIM];
    for (slot, tensor) in [output, input, kernel].into_iter().enumerate() {
        if let Some(dims) = tensor {
            for (k, &d) in dims.iter().take(LAYOUT_SLOT).enumerate() {
                row[slot * LAYOUT_SLOT + k] = d as f32;
            }
        }
    }
    row
}

/// The 24 tile config features of a kernel from its tile choice.
pub fn tile_config_row(
    kernel_bounds: &[i64],
    output_bounds: &[i64],
    input_bounds: &[i64],
) -> [f32; TILE_CONFIG_DIM] {
    let mut row = [0.0f32; TILE_CONFIG_DIM];
    for (g, bounds) in [kernel_bounds, output_bounds, input_bounds]
        .into_iter()
        .enumerate()
    {
        let base = g * 8;
        for (k, &b) in bounds.iter().take(6).enumerate() {
            row[base + k] = b as f32;
        }
        let sum = bounds.iter().fold(0i64, |a, &b| a.saturating_add(b));
        let product = if bounds.is_empty() {
            0
        } else {
            bounds.iter().fold(1i64, |a, &b| a.saturating_mul(b))
        };
        row[base + 6] = sum as f32;
        row[base + 7] = product as f32;
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_row_pads_with_minus_one_and_default_is_all_minus_one() {
        let r = layout_config_row(Some(&[4, 0]), Some(&[0, 4]), Some(&[4, 3]));
        assert_eq!(&r[..6], &[4.0, 0.0, -1.0, -1.0, -1.0, -1.0]);
        assert_eq!(&r[6..8], &[0.0, 4.0]);
        assert_eq!(&r[12..14], &[4.0, 3.0]);
        assert_eq!(layout_config_row(None, None, None), [-1.0; 18]);
        let r = layout_config_row(Some(&[2, 1, 0]), Some(&[3, 2, 1, 0]), None);
        assert_eq!(&r[12..], &[-1.0; 6]);
    }

    #[test]
    fn layout_row_truncates_rank_above_six() {
        let r = layout_config_row(Some(&[7, 6, 5, 4, 3, 2, 1, 0]), None, None);
        assert_eq!(&r[..6], &[7.0, 6.0, 5.0, 4.0, 3.0, 2.0]);
        assert_eq!(r[6], -1.0);
    }

    #[test]
    fn tile_row_sums_products_and_empty_product_zero() {
        let r = tile_config_row(&[2, 5, 2], &[1, 80, 2], &[]);
        assert_eq!(&r[..8], &[2.0, 5.0, 2.0, 0.0, 0.0, 0.0, 9.0, 20.0]);
        assert_eq!(&r[8..16], &[1.0, 80.0, 2.0, 0.0, 0.0, 0.0, 83.0, 160.0]);
        assert_eq!(&r[16..], &[0.0; 8]);
        assert_eq!(tile_config_row(&[], &[], &[]), [0.0; 24]);
    }
}

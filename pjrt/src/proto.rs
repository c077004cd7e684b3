//! The protobuf messages the backend writes and reads:
//! - the module: [`module_proto`] serializes a module with hlo-opt's own
//!   `HloModuleProto` writer ([`hlo::proto::to_bytes`]); no Python runs. A
//!   module the writer cannot express is an [`PjrtError::Unsupported`]
//!   error naming what it could not write.
//! - the compile options: [`CompileOptionsProto`] and the messages it holds,
//!   prost messages written here with the field numbers of XLA's
//!   `CompileOptionsProto`, `ExecutableBuildOptionsProto` and
//!   `OptionOverrideProto` (`xla/pjrt/proto/compile_options.proto`; numbers
//!   checked against the bytes jaxlib's `CompileOptions` writes). Only the
//!   fields the backend sets are declared. [`compile_options`] builds them:
//!   one replica, one partition, any device, the parameter tupling a
//!   module's signature needs, and the `env_option_overrides` (an override
//!   is applied on top of XLA's default debug options; writing
//!   `debug_options` ourselves would zero every other default and the
//!   compile fails).
//! - reading back the layouts of an optimized `HloModuleProto`
//!   ([`instruction_layouts`]), to confirm which layouts XLA compiled.
//!
//! Invariants: decoding never panics on malformed bytes (prost checks every
//! length) and skips fields it does not know; encoding is deterministic
//! (the override map is a `BTreeMap`).

use std::collections::BTreeMap;

use hlo::proto::xla::{HloModuleProto, ProgramShapeProto, ShapeProto};
use prost::Message as _;

use crate::{PjrtError, Result};

/// XLA passes disabled on the layouts-kept path: `layout-assignment` would
/// replace the module's layouts, `algsimp` deletes the copies that carry
/// them, the pre-layout `cse` merges copies into mixed-layout elementwise
/// ops that the CPU backend refuses.
pub const DISABLED_PASSES_LAYOUTS_KEPT: &str = "layout-assignment,algsimp,cse";

/// The debug option [`DISABLED_PASSES_LAYOUTS_KEPT`] is given as.
pub const DISABLE_PASSES_OPTION: &str = "xla_disable_hlo_passes";

/// `xla.CompileOptionsProto` (the fields the backend sets).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompileOptionsProto {
    /// The entry computation takes one tuple parameter, fed as its leaves.
    #[prost(bool, tag = "2")]
    pub parameter_is_tupled_arguments: bool,
    #[prost(message, optional, tag = "3")]
    pub executable_build_options: Option<ExecutableBuildOptionsProto>,
    /// Debug options applied on top of XLA's defaults, by option name.
    #[prost(btree_map = "string, message", tag = "7")]
    pub env_option_overrides: BTreeMap<String, OptionOverrideProto>,
}

/// `xla.ExecutableBuildOptionsProto` (the fields the backend sets).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecutableBuildOptionsProto {
    /// -1: any device.
    #[prost(int64, tag = "1")]
    pub device_ordinal: i64,
    #[prost(int64, tag = "4")]
    pub num_replicas: i64,
    #[prost(int64, tag = "5")]
    pub num_partitions: i64,
}

/// `xla.OptionOverrideProto`: one value of a debug option.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionOverrideProto {
    #[prost(oneof = "OptionValue", tags = "1, 2, 3, 4")]
    pub value: Option<OptionValue>,
}

/// The value of an [`OptionOverrideProto`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum OptionValue {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
}

/// The compile options of one compile: one replica and one partition on
/// any device, `tupled_parameter` (see [`entry_takes_a_tuple`]), and each
/// `(name, value)` of `overrides` as a string override.
pub fn compile_options(overrides: &[(&str, &str)], tupled_parameter: bool) -> CompileOptionsProto {
    CompileOptionsProto {
        parameter_is_tupled_arguments: tupled_parameter,
        executable_build_options: Some(ExecutableBuildOptionsProto {
            device_ordinal: -1,
            num_replicas: 1,
            num_partitions: 1,
        }),
        env_option_overrides: overrides
            .iter()
            .map(|(name, value)| {
                (
                    name.to_string(),
                    OptionOverrideProto {
                        value: Some(OptionValue::String(value.to_string())),
                    },
                )
            })
            .collect(),
    }
}

/// Decodes serialized compile options (what the worker hands XLA).
pub fn decode_compile_options(bytes: &[u8]) -> Result<CompileOptionsProto> {
    CompileOptionsProto::decode(bytes)
        .map_err(|e| PjrtError::Protocol(format!("malformed CompileOptionsProto: {e}")))
}

/// The serialized `HloModuleProto` of `m`, written by hlo-opt
/// ([`hlo::proto::to_bytes`]).
pub fn module_proto(m: &hlo::Module) -> Result<Vec<u8>> {
    hlo::proto::to_bytes(m).map_err(|e| {
        PjrtError::Unsupported(format!(
            "module {} cannot be written as an HloModuleProto: {e}",
            m.name
        ))
    })
}

/// Only the entry signature of an `HloModuleProto` (field 4,
/// `host_program_shape`); prost skips every other field.
#[derive(Clone, PartialEq, prost::Message)]
struct ModuleSignature {
    #[prost(message, optional, tag = "4")]
    host_program_shape: Option<ProgramShapeProto>,
}

/// `PrimitiveType.TUPLE`.
const TUPLE: i32 = 13;

/// Whether the entry computation of a serialized `HloModuleProto` takes
/// exactly one parameter and it is a tuple: PJRT then compiles it with
/// `parameter_is_tupled_arguments` and the caller passes the tuple's
/// leaves ([`crate::inputs_for`] generates them so).
pub fn entry_takes_a_tuple(module: &[u8]) -> Result<bool> {
    let sig = ModuleSignature::decode(module)
        .map_err(|e| PjrtError::Protocol(format!("malformed HloModuleProto: {e}")))?;
    let params = sig
        .host_program_shape
        .map(|p| p.parameters)
        .unwrap_or_default();
    Ok(matches!(&params[..], [only] if only.element_type == TUPLE))
}

/// An instruction of a compiled module and its layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstLayout {
    pub computation: String,
    pub name: String,
    pub opcode: String,
    /// `minor_to_major` of an array result; `None` for tuples, tokens and
    /// arrays without a layout.
    pub minor_to_major: Option<Vec<i64>>,
}

/// `xla.HloModuleProtoWithConfig`: the module (field 1) and its config
/// (field 2, not read).
#[derive(Clone, PartialEq, prost::Message)]
struct ModuleWithConfig {
    #[prost(message, optional, tag = "1")]
    hlo_module: Option<HloModuleProto>,
}

fn malformed(e: prost::DecodeError) -> PjrtError {
    PjrtError::Protocol(format!("malformed HloModuleProto: {e}"))
}

/// Every instruction of a serialized `HloModuleProto` with its layout.
///
/// `PJRT_Executable_OptimizedProgram` of XLA:CPU answers an
/// `HloModuleProtoWithConfig`; such a wrapper is unwrapped (a module
/// without computations is read as one). Instructions XLA cloned into
/// fusions keep their name with a `.N` suffix.
pub fn instruction_layouts(module: &[u8]) -> Result<Vec<InstLayout>> {
    let plain = HloModuleProto::decode(module);
    let m = match plain {
        Ok(m) if !m.computations.is_empty() => m,
        plain => match ModuleWithConfig::decode(module) {
            Ok(ModuleWithConfig {
                hlo_module: Some(m),
            }) => m,
            _ => plain.map_err(malformed)?,
        },
    };
    let layout = |s: &Option<ShapeProto>| -> Option<Vec<i64>> {
        let s = s.as_ref()?;
        if s.element_type == TUPLE {
            return None;
        }
        s.layout.as_ref().map(|l| l.minor_to_major.clone())
    };
    Ok(m.computations
        .iter()
        .flat_map(|c| {
            c.instructions.iter().map(|i| InstLayout {
                computation: c.name.clone(),
                name: i.name.clone(),
                opcode: i.opcode.clone(),
                minor_to_major: layout(&i.shape),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The bytes jaxlib 0.10.2's `CompileOptions` writes for the same
    /// settings: its `env_option_overrides` entry (field 7), its build
    /// options' device_ordinal -1 (a ten-byte varint), 1 replica, 1
    /// partition, and `parameter_is_tupled_arguments` (field 2).
    #[test]
    fn the_options_are_encoded_as_xla_writes_them() {
        let b = compile_options(
            &[(DISABLE_PASSES_OPTION, DISABLED_PASSES_LAYOUTS_KEPT)],
            false,
        )
        .encode_to_vec();
        let entry = "3a390a16786c615f64697361626c655f686c6f5f706173736573121f0a1d6c61796f75742d61737369676e6d656e742c616c6773696d702c637365";
        assert!(hex(&b).ends_with(entry), "{}", hex(&b));
        assert!(
            hex(&b).starts_with("1a0f08ffffffffffffffffff0120012801"),
            "{}",
            hex(&b)
        );
        let t = compile_options(&[], true).encode_to_vec();
        assert!(hex(&t).starts_with("10011a0f"), "{}", hex(&t));
    }

    /// What the backend sends for each pipeline, decoded: the override is
    /// there exactly on the layouts-kept path.
    #[test]
    fn the_layouts_kept_options_carry_the_disabled_passes_override() {
        use crate::Pipeline;
        let kept =
            decode_compile_options(&Pipeline::LayoutsKept.compile_options(false)).expect("decodes");
        assert_eq!(
            kept.env_option_overrides.get(DISABLE_PASSES_OPTION),
            Some(&OptionOverrideProto {
                value: Some(OptionValue::String(DISABLED_PASSES_LAYOUTS_KEPT.into()))
            })
        );
        assert_eq!(kept.env_option_overrides.len(), 1);
        let build = kept.executable_build_options.expect("build options");
        assert_eq!(
            (
                build.device_ordinal,
                build.num_replicas,
                build.num_partitions
            ),
            (-1, 1, 1)
        );
        assert!(!kept.parameter_is_tupled_arguments);
        let xla = decode_compile_options(&Pipeline::Xla.compile_options(true)).expect("decodes");
        assert!(xla.env_option_overrides.is_empty());
        assert!(xla.parameter_is_tupled_arguments);
    }

    #[test]
    fn a_single_tuple_parameter_is_detected_from_the_signature() {
        let parse = |t: &str| module_proto(&hlo::parse_module(t).expect("parses")).expect("writes");
        let tupled = parse("HloModule m\n\nENTRY e {\n  p = (f32[2], s32[]) parameter(0)\n  ROOT g = f32[2] get-tuple-element(p), index=0\n}\n");
        assert!(entry_takes_a_tuple(&tupled).expect("reads"));
        let flat = parse("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  q = f32[2] parameter(1)\n  ROOT a = f32[2] add(p, q)\n}\n");
        assert!(!entry_takes_a_tuple(&flat).expect("reads"));
    }

    #[test]
    fn malformed_protos_are_errors() {
        for bad in [
            &[0x1a, 0x05, 0x01][..],
            &[0xff; 11],
            &[0x1a, 0x02, 0x12, 0x09],
        ] {
            assert!(instruction_layouts(bad).is_err(), "{bad:?}");
        }
        // The signature reader skips the computations whole: only a broken
        // top level is its error.
        for bad in [
            &[0x1a, 0x05, 0x01][..],
            &[0xff; 11],
            &[0x22, 0x03, 0x0a, 0x05],
        ] {
            assert!(entry_takes_a_tuple(bad).is_err(), "{bad:?}");
        }
        assert_eq!(instruction_layouts(&[]).expect("empty"), vec![]);
    }

    #[test]
    fn layouts_are_read_from_a_module_and_from_its_config_wrapper() {
        let m = hlo::parse_module("HloModule m\n\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  ROOT t = (f32[2,3]{0,1}) tuple(p)\n}\n").expect("parses");
        let bytes = module_proto(&m).expect("writes");
        let l = instruction_layouts(&bytes).expect("reads");
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[0].name.as_str(), l[0].minor_to_major.clone()),
            ("p", Some(vec![0, 1]))
        );
        assert_eq!(l[1].minor_to_major, None);
        let wrapped = ModuleWithConfig {
            hlo_module: HloModuleProto::decode(&bytes[..]).ok(),
        }
        .encode_to_vec();
        assert_eq!(instruction_layouts(&wrapped).expect("reads"), l);
    }
}

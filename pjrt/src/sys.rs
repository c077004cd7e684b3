//! The slice of the PJRT C API this crate calls, written by hand from the
//! facts of `pjrt_c_api.h` (API 0.81, as shipped in the `xla-cpu-pjrt`
//! wheel): argument structs, the order of the function table, enum values.
//!
//! Invariants: every argument struct is `#[repr(C)]` with the fields of the
//! header in the header's order; its `struct_size` is what the header's
//! `PJRT_STRUCT_SIZE(struct, last_field)` gives (offset of the last field
//! plus its size, no tail padding), and each size is pinned by a unit test.
//! Plugins of newer API minors accept these (smaller) structs: a struct only
//! grows at its end, and the plugin reads `struct_size`. The function table
//! is read by index ([`FnIndex`]) after checking the plugin's table holds it.

#![allow(non_camel_case_types, dead_code)]

use std::ffi::{c_char, c_int, c_void};

/// The API major version this crate speaks.
pub const API_MAJOR: i32 = 0;
/// The oldest API minor whose structs match these (the header's version).
pub const API_MIN_MINOR: i32 = 81;

pub type Error = c_void;
pub type Client = c_void;
pub type Device = c_void;
pub type Event = c_void;
pub type Buffer = c_void;
pub type Executable = c_void;
pub type LoadedExecutable = c_void;

/// `PJRT_STRUCT_SIZE`: the offset of `last` plus its size.
macro_rules! struct_size {
    ($t:ty, $last:ident) => {{
        fn size_of_return<F: FnOnce(&$t) -> R, R>(_: F) -> usize {
            std::mem::size_of::<R>()
        }
        std::mem::offset_of!($t, $last) + size_of_return(|s: &$t| s.$last)
    }};
}
pub(crate) use struct_size;

/// Header shared by every argument struct.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Head {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
}

#[repr(C)]
pub struct ApiVersion {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// The start of `PJRT_Api`: sizes and version; the function pointers follow.
#[repr(C)]
pub struct ApiHead {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub version: ApiVersion,
}

/// Position of a function in `PJRT_Api`'s table (after [`ApiHead`]).
#[derive(Clone, Copy, Debug)]
pub enum FnIndex {
    ErrorDestroy = 0,
    ErrorMessage = 1,
    PluginInitialize = 3,
    EventDestroy = 5,
    EventAwait = 8,
    ClientCreate = 10,
    ClientDestroy = 11,
    ClientPlatformName = 12,
    ClientAddressableDevices = 16,
    ClientCompile = 20,
    ClientBufferFromHostBuffer = 22,
    ExecutableDestroy = 40,
    ExecutableNumOutputs = 44,
    ExecutableOptimizedProgram = 48,
    LoadedExecutableDestroy = 50,
    LoadedExecutableGetExecutable = 51,
    LoadedExecutableExecute = 55,
    BufferDestroy = 58,
    BufferElementType = 59,
    BufferDimensions = 60,
    BufferToHostBuffer = 70,
}

/// The highest index this crate calls; the plugin's table must reach it.
pub const MAX_FN_INDEX: usize = FnIndex::BufferToHostBuffer as usize;

#[repr(C)]
pub struct ErrorDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub error: *mut Error,
}

#[repr(C)]
pub struct ErrorMessageArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub error: *const Error,
    pub message: *const c_char,
    pub message_size: usize,
}

#[repr(C)]
pub struct PluginInitializeArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
}

#[repr(C)]
pub struct EventArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub event: *mut Event,
}

#[repr(C)]
pub struct ClientCreateArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub create_options: *const c_void,
    pub num_options: usize,
    pub kv_get_callback: *mut c_void,
    pub kv_get_user_arg: *mut c_void,
    pub kv_put_callback: *mut c_void,
    pub kv_put_user_arg: *mut c_void,
    pub client: *mut Client,
    pub kv_try_get_callback: *mut c_void,
    pub kv_try_get_user_arg: *mut c_void,
}

#[repr(C)]
pub struct ClientDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
}

#[repr(C)]
pub struct ClientPlatformNameArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub platform_name: *const c_char,
    pub platform_name_size: usize,
}

#[repr(C)]
pub struct ClientAddressableDevicesArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub addressable_devices: *const *mut Device,
    pub num_addressable_devices: usize,
}

#[repr(C)]
pub struct Program {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub code: *mut c_char,
    pub code_size: usize,
    pub format: *const c_char,
    pub format_size: usize,
}

#[repr(C)]
pub struct ClientCompileArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub program: *const Program,
    pub compile_options: *const c_char,
    pub compile_options_size: usize,
    pub executable: *mut LoadedExecutable,
}

/// `PJRT_Buffer_Type` values.
pub mod buffer_type {
    pub const PRED: i32 = 1;
    pub const S8: i32 = 2;
    pub const S16: i32 = 3;
    pub const S32: i32 = 4;
    pub const S64: i32 = 5;
    pub const U8: i32 = 6;
    pub const U16: i32 = 7;
    pub const U32: i32 = 8;
    pub const U64: i32 = 9;
    pub const F16: i32 = 10;
    pub const F32: i32 = 11;
    pub const F64: i32 = 12;
    pub const BF16: i32 = 13;
    pub const C64: i32 = 14;
    pub const C128: i32 = 15;
}

/// `PJRT_HostBufferSemantics_kImmutableOnlyDuringCall`: the plugin copies
/// the host data before `BufferFromHostBuffer` returns.
pub const HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL: i32 = 0;

#[repr(C)]
pub struct BufferFromHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub data: *const c_void,
    pub type_: i32,
    pub dims: *const i64,
    pub num_dims: usize,
    pub byte_strides: *const i64,
    pub num_byte_strides: usize,
    pub host_buffer_semantics: i32,
    pub device: *mut Device,
    pub memory: *mut c_void,
    pub device_layout: *mut c_void,
    pub done_with_host_buffer: *mut Event,
    pub buffer: *mut Buffer,
}

#[repr(C)]
pub struct ExecutableArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub executable: *mut Executable,
}

#[repr(C)]
pub struct ExecutableNumOutputsArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub executable: *mut Executable,
    pub num_outputs: usize,
}

#[repr(C)]
pub struct ExecutableOptimizedProgramArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub executable: *mut Executable,
    pub program: *mut Program,
}

#[repr(C)]
pub struct LoadedExecutableGetExecutableArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub loaded_executable: *mut LoadedExecutable,
    pub executable: *mut Executable,
}

#[repr(C)]
pub struct ExecuteOptions {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub send_callbacks: *mut c_void,
    pub recv_callbacks: *mut c_void,
    pub num_send_ops: usize,
    pub num_recv_ops: usize,
    pub launch_id: c_int,
    pub non_donatable_input_indices: *const i64,
    pub num_non_donatable_input_indices: usize,
    pub context: *mut c_void,
    pub call_location: *const c_char,
    pub num_tasks: usize,
    pub task_ids: *mut c_int,
    pub incarnation_ids: *mut i64,
}

#[repr(C)]
pub struct LoadedExecutableExecuteArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub executable: *mut LoadedExecutable,
    pub options: *mut ExecuteOptions,
    pub argument_lists: *const *const *mut Buffer,
    pub num_devices: usize,
    pub num_args: usize,
    pub output_lists: *const *mut *mut Buffer,
    pub device_complete_events: *mut *mut Event,
    pub execute_device: *mut Device,
}

#[repr(C)]
pub struct BufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub buffer: *mut Buffer,
}

#[repr(C)]
pub struct BufferElementTypeArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub buffer: *mut Buffer,
    pub type_: i32,
}

#[repr(C)]
pub struct BufferDimensionsArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub buffer: *mut Buffer,
    pub dims: *const i64,
    pub num_dims: usize,
}

#[repr(C)]
pub struct MemoryLayoutTiled {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub minor_to_major: *const i64,
    pub minor_to_major_size: usize,
    pub tile_dims: *const i64,
    pub tile_dim_sizes: *const usize,
    pub num_tiles: usize,
}

/// `PJRT_Buffer_MemoryLayout` with its union's tiled member (the larger one).
#[repr(C)]
pub struct MemoryLayout {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub tiled: MemoryLayoutTiled,
    pub type_: i32,
}

/// `PJRT_Buffer_MemoryLayout_Type_Tiled`.
pub const MEMORY_LAYOUT_TILED: i32 = 0;

#[repr(C)]
pub struct BufferToHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub src: *mut Buffer,
    pub host_layout: *mut MemoryLayout,
    pub dst: *mut c_void,
    pub dst_size: usize,
    pub event: *mut Event,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the 0.81 header's `PJRT_STRUCT_SIZE` gives on 64-bit
    /// targets (a plugin refuses a struct whose size it does not know, e.g.
    /// "Unexpected PJRT_Client_Create_Args size: expected 88, got 72").
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn struct_sizes_match_the_header() {
        assert_eq!(struct_size!(ApiVersion, minor_version), 24);
        assert_eq!(struct_size!(ErrorDestroyArgs, error), 24);
        assert_eq!(struct_size!(ErrorMessageArgs, message_size), 40);
        assert_eq!(struct_size!(PluginInitializeArgs, extension_start), 16);
        assert_eq!(struct_size!(EventArgs, event), 24);
        assert_eq!(struct_size!(ClientCreateArgs, kv_try_get_user_arg), 88);
        assert_eq!(struct_size!(ClientDestroyArgs, client), 24);
        assert_eq!(struct_size!(ClientPlatformNameArgs, platform_name_size), 40);
        assert_eq!(
            struct_size!(ClientAddressableDevicesArgs, num_addressable_devices),
            40
        );
        assert_eq!(struct_size!(Program, format_size), 48);
        assert_eq!(struct_size!(ClientCompileArgs, executable), 56);
        assert_eq!(struct_size!(BufferFromHostBufferArgs, buffer), 120);
        assert_eq!(struct_size!(ExecutableArgs, executable), 24);
        assert_eq!(struct_size!(ExecutableNumOutputsArgs, num_outputs), 32);
        assert_eq!(struct_size!(ExecutableOptimizedProgramArgs, program), 32);
        assert_eq!(
            struct_size!(LoadedExecutableGetExecutableArgs, executable),
            32
        );
        assert_eq!(struct_size!(ExecuteOptions, incarnation_ids), 112);
        assert_eq!(
            struct_size!(LoadedExecutableExecuteArgs, execute_device),
            80
        );
        assert_eq!(struct_size!(BufferArgs, buffer), 24);
        assert_eq!(struct_size!(BufferElementTypeArgs, type_), 28);
        assert_eq!(struct_size!(BufferDimensionsArgs, num_dims), 40);
        assert_eq!(struct_size!(BufferToHostBufferArgs, event), 56);
        assert_eq!(struct_size!(MemoryLayoutTiled, num_tiles), 56);
        assert_eq!(struct_size!(MemoryLayout, type_), 76);
        assert_eq!(std::mem::size_of::<ApiHead>(), 40);
    }
}

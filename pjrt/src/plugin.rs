//! Loading a PJRT plugin and calling it: the only module that touches the
//! C API. Runs inside the worker process (see `worker.rs`), never in the
//! caller's: XLA may abort the process on a fatal check.
//!
//! Invariants: a plugin file is checked (a regular file, an ELF shared
//! object of this machine's word size, of a plausible size) before it is
//! opened; its `GetPjrtApi` table must report API major
//! [`sys::API_MAJOR`], a minor of at least [`sys::API_MIN_MINOR`] and hold
//! every function this crate calls. Every `PJRT_Error` is turned into a
//! [`PjrtError::Plugin`] message and destroyed. Handles are destroyed by
//! their `Drop`s, children before the client they came from.

use std::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::sync::Arc;

use crate::sys::{self, struct_size, FnIndex};
use crate::{ElementType, HostArray, PjrtError, Result};

type RawFn = unsafe extern "C" fn(*mut c_void) -> *mut sys::Error;
type GetApiFn = unsafe extern "C" fn() -> *const sys::ApiHead;

/// Smallest and largest plausible plugin sizes (the CPU plugins are
/// 60-200 MB).
const MIN_PLUGIN_BYTES: u64 = 4096;
const MAX_PLUGIN_BYTES: u64 = 8 << 30;

/// Checks that `path` looks like a loadable shared library before `dlopen`
/// runs its initializers.
pub fn check_plugin_file(path: &Path) -> Result<()> {
    let bad = |why: String| PjrtError::Plugin {
        plugin: path.display().to_string(),
        message: why,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if meta.len() < MIN_PLUGIN_BYTES || meta.len() > MAX_PLUGIN_BYTES {
        return Err(bad(format!(
            "{} bytes is not the size of a PJRT plugin",
            meta.len()
        )));
    }
    let mut head = [0u8; 20];
    {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| bad(format!("cannot open it: {e}")))?;
        f.read_exact(&mut head)
            .map_err(|e| bad(format!("cannot read its header: {e}")))?;
    }
    if cfg!(target_os = "linux") {
        if &head[..4] != b"\x7fELF" {
            return Err(bad("not an ELF shared library".into()));
        }
        let class = if cfg!(target_pointer_width = "64") {
            2
        } else {
            1
        };
        if head[4] != class {
            return Err(bad("an ELF file of another word size".into()));
        }
        // e_type (little-endian on every target PJRT plugins ship for): 3 = ET_DYN.
        if head[5] == 1 && u16::from_le_bytes([head[16], head[17]]) != 3 {
            return Err(bad("an ELF file that is not a shared library".into()));
        }
    }
    Ok(())
}

/// A loaded plugin: its library and its function table.
pub struct Api {
    head: *const sys::ApiHead,
    version: (i32, i32),
    path: PathBuf,
    _lib: libloading::Library,
}

// The table is immutable and PJRT functions are thread-safe.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

impl Api {
    /// Checks, opens and initializes the plugin at `path`.
    pub fn load(path: &Path) -> Result<Arc<Api>> {
        check_plugin_file(path)?;
        let plugin = path.display().to_string();
        let bad = |message: String| PjrtError::Plugin {
            plugin: plugin.clone(),
            message,
        };
        // SAFETY: opening a shared library runs its initializers; the file
        // was checked above to be a shared library of this machine.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| bad(format!("cannot load it: {e}")))?;
        // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin.
        let get: libloading::Symbol<GetApiFn> = unsafe { lib.get(b"GetPjrtApi\0") }
            .map_err(|e| bad(format!("no GetPjrtApi symbol (not a PJRT plugin?): {e}")))?;
        // SAFETY: returns a pointer to a static table, or null.
        let head = unsafe { get() };
        if head.is_null() {
            return Err(bad("GetPjrtApi returned NULL".into()));
        }
        // SAFETY: non-null; the table starts with its size and version.
        let (size, major, minor) = unsafe {
            (
                (*head).struct_size,
                (*head).version.major_version,
                (*head).version.minor_version,
            )
        };
        if major != sys::API_MAJOR || minor < sys::API_MIN_MINOR {
            return Err(bad(format!(
                "PJRT API {major}.{minor}; this build speaks {}.{} and newer minors",
                sys::API_MAJOR,
                sys::API_MIN_MINOR
            )));
        }
        let needed = std::mem::size_of::<sys::ApiHead>()
            + (sys::MAX_FN_INDEX + 1) * std::mem::size_of::<usize>();
        if size < needed {
            return Err(bad(format!(
                "its function table has {size} bytes, fewer than the {needed} this build reads"
            )));
        }
        let api = Api {
            head,
            version: (major, minor),
            path: path.to_path_buf(),
            _lib: lib,
        };
        let mut args = sys::PluginInitializeArgs {
            struct_size: struct_size!(sys::PluginInitializeArgs, extension_start),
            extension_start: null_mut(),
        };
        api.call(FnIndex::PluginInitialize, &mut args)?;
        Ok(Arc::new(api))
    }

    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    fn function(&self, f: FnIndex) -> Result<RawFn> {
        // SAFETY: `load` checked the table reaches MAX_FN_INDEX; each slot
        // is a nullable function pointer.
        let slot = unsafe {
            let base = (self.head as *const u8).add(std::mem::size_of::<sys::ApiHead>());
            *(base as *const Option<RawFn>).add(f as usize)
        };
        slot.ok_or_else(|| PjrtError::Plugin {
            plugin: self.path.display().to_string(),
            message: format!("the plugin does not implement {f:?}"),
        })
    }

    /// Calls table entry `f` with `args`; a returned `PJRT_Error` becomes
    /// `Err` with its message.
    fn call<A>(&self, f: FnIndex, args: &mut A) -> Result<()> {
        let fun = self.function(f)?;
        // SAFETY: `args` is the argument struct of `f` (by construction at
        // each call site), filled with its `struct_size`.
        let err = unsafe { fun(args as *mut A as *mut c_void) };
        if err.is_null() {
            return Ok(());
        }
        Err(PjrtError::Xla {
            call: format!("{f:?}"),
            message: self.take_error(err),
        })
    }

    fn take_error(&self, err: *mut sys::Error) -> String {
        let mut msg = sys::ErrorMessageArgs {
            struct_size: struct_size!(sys::ErrorMessageArgs, message_size),
            extension_start: null_mut(),
            error: err,
            message: null(),
            message_size: 0,
        };
        let mut text = String::from("(no message)");
        if let Ok(f) = self.function(FnIndex::ErrorMessage) {
            // SAFETY: `err` is a live error; the message lives as long as it.
            unsafe {
                let f: unsafe extern "C" fn(*mut sys::ErrorMessageArgs) = std::mem::transmute(f);
                f(&mut msg);
                if !msg.message.is_null() {
                    let bytes =
                        std::slice::from_raw_parts(msg.message as *const u8, msg.message_size);
                    text = String::from_utf8_lossy(bytes).into_owned();
                }
            }
        }
        if let Ok(f) = self.function(FnIndex::ErrorDestroy) {
            let mut d = sys::ErrorDestroyArgs {
                struct_size: struct_size!(sys::ErrorDestroyArgs, error),
                extension_start: null_mut(),
                error: err,
            };
            // SAFETY: destroys the error once; it is not used afterwards.
            unsafe {
                let f: unsafe extern "C" fn(*mut sys::ErrorDestroyArgs) = std::mem::transmute(f);
                f(&mut d);
            }
        }
        text
    }

    /// Waits for `event` (if any) and destroys it.
    fn await_event(&self, event: *mut sys::Event) -> Result<()> {
        if event.is_null() {
            return Ok(());
        }
        let mut a = sys::EventArgs {
            struct_size: struct_size!(sys::EventArgs, event),
            extension_start: null_mut(),
            event,
        };
        let waited = self.call(FnIndex::EventAwait, &mut a);
        let mut d = sys::EventArgs {
            struct_size: struct_size!(sys::EventArgs, event),
            extension_start: null_mut(),
            event,
        };
        let destroyed = self.call(FnIndex::EventDestroy, &mut d);
        waited.and(destroyed)
    }
}

/// A PJRT client on the plugin's first addressable device.
pub struct Client {
    api: Arc<Api>,
    raw: *mut sys::Client,
    device: *mut sys::Device,
}

impl Client {
    pub fn new(api: Arc<Api>) -> Result<Client> {
        let mut a = sys::ClientCreateArgs {
            struct_size: struct_size!(sys::ClientCreateArgs, kv_try_get_user_arg),
            extension_start: null_mut(),
            create_options: null(),
            num_options: 0,
            kv_get_callback: null_mut(),
            kv_get_user_arg: null_mut(),
            kv_put_callback: null_mut(),
            kv_put_user_arg: null_mut(),
            client: null_mut(),
            kv_try_get_callback: null_mut(),
            kv_try_get_user_arg: null_mut(),
        };
        api.call(FnIndex::ClientCreate, &mut a)?;
        let mut client = Client {
            api,
            raw: a.client,
            device: null_mut(),
        };
        let mut d = sys::ClientAddressableDevicesArgs {
            struct_size: struct_size!(sys::ClientAddressableDevicesArgs, num_addressable_devices),
            extension_start: null_mut(),
            client: client.raw,
            addressable_devices: null(),
            num_addressable_devices: 0,
        };
        client.api.call(FnIndex::ClientAddressableDevices, &mut d)?;
        if d.num_addressable_devices == 0 || d.addressable_devices.is_null() {
            return Err(PjrtError::Plugin {
                plugin: client.api.path.display().to_string(),
                message: "the client has no addressable device".into(),
            });
        }
        // SAFETY: the plugin returned an array of `num_addressable_devices`.
        client.device = unsafe { *d.addressable_devices };
        Ok(client)
    }

    /// The platform name (`cpu`, `cuda`, ...).
    pub fn platform(&self) -> Result<String> {
        let mut a = sys::ClientPlatformNameArgs {
            struct_size: struct_size!(sys::ClientPlatformNameArgs, platform_name_size),
            extension_start: null_mut(),
            client: self.raw,
            platform_name: null(),
            platform_name_size: 0,
        };
        self.api.call(FnIndex::ClientPlatformName, &mut a)?;
        if a.platform_name.is_null() {
            return Ok(String::new());
        }
        // SAFETY: owned by the client, `platform_name_size` bytes.
        let b = unsafe {
            std::slice::from_raw_parts(a.platform_name as *const u8, a.platform_name_size)
        };
        Ok(String::from_utf8_lossy(b).into_owned())
    }

    /// Compiles a serialized `HloModuleProto` with serialized
    /// `CompileOptionsProto` options.
    pub fn compile(&self, hlo_proto: &[u8], options: &[u8]) -> Result<LoadedExecutable> {
        let format = b"hlo";
        let program = sys::Program {
            struct_size: struct_size!(sys::Program, format_size),
            extension_start: null_mut(),
            code: hlo_proto.as_ptr() as *mut c_char,
            code_size: hlo_proto.len(),
            format: format.as_ptr() as *const c_char,
            format_size: format.len(),
        };
        let mut a = sys::ClientCompileArgs {
            struct_size: struct_size!(sys::ClientCompileArgs, executable),
            extension_start: null_mut(),
            client: self.raw,
            program: &program,
            compile_options: options.as_ptr() as *const c_char,
            compile_options_size: options.len(),
            executable: null_mut(),
        };
        self.api.call(FnIndex::ClientCompile, &mut a)?;
        Ok(LoadedExecutable {
            api: self.api.clone(),
            raw: a.executable,
        })
    }

    /// Copies a host array to the device.
    pub fn to_device(&self, array: &HostArray) -> Result<DeviceBuffer> {
        let expected = array.element_count() * array.ty.byte_size();
        if array.data.len() != expected {
            return Err(PjrtError::Input(format!(
                "{} bytes for a {}{:?} array of {expected} bytes",
                array.data.len(),
                array.ty.name(),
                array.dims
            )));
        }
        let mut a = sys::BufferFromHostBufferArgs {
            struct_size: struct_size!(sys::BufferFromHostBufferArgs, buffer),
            extension_start: null_mut(),
            client: self.raw,
            data: array.data.as_ptr() as *const c_void,
            type_: array.ty.pjrt_type(),
            dims: array.dims.as_ptr(),
            num_dims: array.dims.len(),
            byte_strides: null(),
            num_byte_strides: 0,
            host_buffer_semantics: sys::HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL,
            device: self.device,
            memory: null_mut(),
            device_layout: null_mut(),
            done_with_host_buffer: null_mut(),
            buffer: null_mut(),
        };
        self.api.call(FnIndex::ClientBufferFromHostBuffer, &mut a)?;
        let buf = DeviceBuffer {
            api: self.api.clone(),
            raw: a.buffer,
        };
        self.api.await_event(a.done_with_host_buffer)?;
        Ok(buf)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let mut a = sys::ClientDestroyArgs {
            struct_size: struct_size!(sys::ClientDestroyArgs, client),
            extension_start: null_mut(),
            client: self.raw,
        };
        let _ = self.api.call(FnIndex::ClientDestroy, &mut a);
    }
}

/// A compiled, loaded program.
pub struct LoadedExecutable {
    api: Arc<Api>,
    raw: *mut sys::LoadedExecutable,
}

impl LoadedExecutable {
    /// Runs `args` with `execute` on the compile-time device and calls
    /// `with` on each completed execution's outputs; outputs are destroyed
    /// after it. Inputs are never donated.
    pub fn execute(&self, args: &[DeviceBuffer], num_outputs: usize) -> Result<Vec<DeviceBuffer>> {
        let arg_ptrs: Vec<*mut sys::Buffer> = args.iter().map(|b| b.raw).collect();
        let arg_list: *const *mut sys::Buffer = arg_ptrs.as_ptr();
        let mut outs: Vec<*mut sys::Buffer> = vec![null_mut(); num_outputs.max(1)];
        let out_list: *mut *mut sys::Buffer = outs.as_mut_ptr();
        let keep: Vec<i64> = (0..args.len() as i64).collect();
        let mut options = sys::ExecuteOptions {
            struct_size: struct_size!(sys::ExecuteOptions, incarnation_ids),
            extension_start: null_mut(),
            send_callbacks: null_mut(),
            recv_callbacks: null_mut(),
            num_send_ops: 0,
            num_recv_ops: 0,
            launch_id: 0,
            non_donatable_input_indices: keep.as_ptr(),
            num_non_donatable_input_indices: keep.len(),
            context: null_mut(),
            call_location: null(),
            num_tasks: 0,
            task_ids: null_mut(),
            incarnation_ids: null_mut(),
        };
        let mut done: *mut sys::Event = null_mut();
        let mut a = sys::LoadedExecutableExecuteArgs {
            struct_size: struct_size!(sys::LoadedExecutableExecuteArgs, execute_device),
            extension_start: null_mut(),
            executable: self.raw,
            options: &mut options,
            argument_lists: &arg_list,
            num_devices: 1,
            num_args: args.len(),
            output_lists: &out_list,
            device_complete_events: &mut done,
            execute_device: null_mut(),
        };
        self.api.call(FnIndex::LoadedExecutableExecute, &mut a)?;
        let outputs: Vec<DeviceBuffer> = outs[..num_outputs]
            .iter()
            .map(|&raw| DeviceBuffer {
                api: self.api.clone(),
                raw,
            })
            .collect();
        self.api.await_event(done)?;
        Ok(outputs)
    }

    fn with_executable<T>(&self, f: impl FnOnce(*mut sys::Executable) -> Result<T>) -> Result<T> {
        let mut g = sys::LoadedExecutableGetExecutableArgs {
            struct_size: struct_size!(sys::LoadedExecutableGetExecutableArgs, executable),
            extension_start: null_mut(),
            loaded_executable: self.raw,
            executable: null_mut(),
        };
        self.api
            .call(FnIndex::LoadedExecutableGetExecutable, &mut g)?;
        let out = f(g.executable);
        let mut d = sys::ExecutableArgs {
            struct_size: struct_size!(sys::ExecutableArgs, executable),
            extension_start: null_mut(),
            executable: g.executable,
        };
        let destroyed = self.api.call(FnIndex::ExecutableDestroy, &mut d);
        let out = out?;
        destroyed?;
        Ok(out)
    }

    /// The number of outputs (the leaves of a tuple result).
    pub fn num_outputs(&self) -> Result<usize> {
        self.with_executable(|e| {
            let mut a = sys::ExecutableNumOutputsArgs {
                struct_size: struct_size!(sys::ExecutableNumOutputsArgs, num_outputs),
                extension_start: null_mut(),
                executable: e,
                num_outputs: 0,
            };
            self.api.call(FnIndex::ExecutableNumOutputs, &mut a)?;
            Ok(a.num_outputs)
        })
    }

    /// The optimized program XLA compiled, a serialized `HloModuleProto`.
    pub fn optimized_program(&self) -> Result<Vec<u8>> {
        self.with_executable(|e| {
            let format = b"hlo";
            let mut program = sys::Program {
                struct_size: struct_size!(sys::Program, format_size),
                extension_start: null_mut(),
                code: null_mut(),
                code_size: 0,
                format: format.as_ptr() as *const c_char,
                format_size: format.len(),
            };
            let mut a = sys::ExecutableOptimizedProgramArgs {
                struct_size: struct_size!(sys::ExecutableOptimizedProgramArgs, program),
                extension_start: null_mut(),
                executable: e,
                program: &mut program,
            };
            self.api.call(FnIndex::ExecutableOptimizedProgram, &mut a)?;
            let mut code = vec![0u8; program.code_size];
            program.code = code.as_mut_ptr() as *mut c_char;
            let mut a = sys::ExecutableOptimizedProgramArgs {
                struct_size: struct_size!(sys::ExecutableOptimizedProgramArgs, program),
                extension_start: null_mut(),
                executable: e,
                program: &mut program,
            };
            self.api.call(FnIndex::ExecutableOptimizedProgram, &mut a)?;
            code.truncate(program.code_size);
            Ok(code)
        })
    }
}

impl Drop for LoadedExecutable {
    fn drop(&mut self) {
        let mut a = sys::ExecutableArgs {
            struct_size: struct_size!(sys::ExecutableArgs, executable),
            extension_start: null_mut(),
            executable: self.raw,
        };
        let _ = self.api.call(FnIndex::LoadedExecutableDestroy, &mut a);
    }
}

/// An array on the device.
pub struct DeviceBuffer {
    api: Arc<Api>,
    raw: *mut sys::Buffer,
}

impl DeviceBuffer {
    /// Copies the buffer to the host, in its default (row-major) layout.
    pub fn to_host(&self) -> Result<HostArray> {
        let mut t = sys::BufferElementTypeArgs {
            struct_size: struct_size!(sys::BufferElementTypeArgs, type_),
            extension_start: null_mut(),
            buffer: self.raw,
            type_: 0,
        };
        self.api.call(FnIndex::BufferElementType, &mut t)?;
        let ty = ElementType::from_pjrt(t.type_).ok_or_else(|| {
            PjrtError::Input(format!(
                "an output of PJRT element type {} (unsupported)",
                t.type_
            ))
        })?;
        let mut d = sys::BufferDimensionsArgs {
            struct_size: struct_size!(sys::BufferDimensionsArgs, num_dims),
            extension_start: null_mut(),
            buffer: self.raw,
            dims: null(),
            num_dims: 0,
        };
        self.api.call(FnIndex::BufferDimensions, &mut d)?;
        let dims: Vec<i64> = if d.num_dims == 0 || d.dims.is_null() {
            Vec::new()
        } else {
            // SAFETY: owned by the buffer, `num_dims` values.
            unsafe { std::slice::from_raw_parts(d.dims, d.num_dims) }.to_vec()
        };
        // Read back row-major whatever the device layout is.
        let m2m: Vec<i64> = (0..dims.len() as i64).rev().collect();
        let mut layout = sys::MemoryLayout {
            struct_size: struct_size!(sys::MemoryLayout, type_),
            extension_start: null_mut(),
            tiled: sys::MemoryLayoutTiled {
                struct_size: struct_size!(sys::MemoryLayoutTiled, num_tiles),
                extension_start: null_mut(),
                minor_to_major: m2m.as_ptr(),
                minor_to_major_size: m2m.len(),
                tile_dims: null(),
                tile_dim_sizes: null(),
                num_tiles: 0,
            },
            type_: sys::MEMORY_LAYOUT_TILED,
        };
        let mut a = sys::BufferToHostBufferArgs {
            struct_size: struct_size!(sys::BufferToHostBufferArgs, event),
            extension_start: null_mut(),
            src: self.raw,
            host_layout: &mut layout,
            dst: null_mut(),
            dst_size: 0,
            event: null_mut(),
        };
        self.api.call(FnIndex::BufferToHostBuffer, &mut a)?;
        self.api.await_event(a.event)?;
        let mut data = vec![0u8; a.dst_size];
        let mut a = sys::BufferToHostBufferArgs {
            struct_size: struct_size!(sys::BufferToHostBufferArgs, event),
            extension_start: null_mut(),
            src: self.raw,
            host_layout: &mut layout,
            dst: data.as_mut_ptr() as *mut c_void,
            dst_size: data.len(),
            event: null_mut(),
        };
        self.api.call(FnIndex::BufferToHostBuffer, &mut a)?;
        self.api.await_event(a.event)?;
        Ok(HostArray { ty, dims, data })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let mut a = sys::BufferArgs {
            struct_size: struct_size!(sys::BufferArgs, buffer),
            extension_start: null_mut(),
            buffer: self.raw,
        };
        let _ = self.api.call(FnIndex::BufferDestroy, &mut a);
    }
}

//! The calls into the hlo and passes crates that the C ABI wraps, in one place.

/// Parses and verifies HLO text.
pub(crate) fn parse(text: &str) -> hlo::Result<hlo::Module> {
    let m = hlo::parse_module(text)?;
    hlo::verify_in_source(&m, text, "<input>")?;
    Ok(m)
}

/// Reads and verifies a serialized `HloModuleProto` (fields the IR does
/// not model are an error naming them).
pub(crate) fn parse_proto(bytes: &[u8]) -> hlo::Result<hlo::Module> {
    let m = hlo::proto::from_bytes(bytes)?;
    hlo::verify(&m)?;
    Ok(m)
}

/// Serializes a module as an `HloModuleProto`.
pub(crate) fn serialize_proto(m: &hlo::Module) -> hlo::Result<Vec<u8>> {
    hlo::proto::to_bytes(m)
}

/// Prints a module as HLO text.
pub(crate) fn print(m: &hlo::Module) -> String {
    hlo::print_module(m)
}

/// Runs `passes` (comma-separated) on `m`: whether it changed, and the
/// `--explain` report (empty unless `options.explain`).
pub(crate) fn run_pipeline(
    m: &mut hlo::Module,
    passes: &str,
    options: passes::PassOptions,
) -> Result<(bool, String), passes::PassError> {
    let mut cx = passes::PassContext::new(options);
    let changed = passes::run_pipeline(m, passes, &mut cx)?;
    Ok((changed, cx.explain))
}

/// Names of all registered passes, one per line.
pub(crate) fn list_passes() -> String {
    passes::list_passes()
        .iter()
        .map(|(name, _)| format!("{name}\n"))
        .collect()
}

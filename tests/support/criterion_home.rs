//! Where every benchmark of the workspace writes Criterion's reports:
//! `$CRITERION_HOME`, else the workspace's `target/criterion`
//! (`$CARGO_TARGET_DIR/criterion`), wherever the bench runs from — never into
//! a crate folder, where git would see them. Included by each crate's benches
//! with `#[path = "../../tests/support/criterion_home.rs"] #[macro_use] mod
//! criterion_home;`, which then end with `bench_main!(bench);` (or call
//! [`criterion_config`] from their own `main`).

use criterion::Criterion;

/// Criterion's default configuration with the output folder above.
pub fn criterion_config() -> Criterion {
    let dir = std::env::var_os("CRITERION_HOME").map_or_else(
        || {
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(
                    || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
                    std::path::PathBuf::from,
                )
                .join("criterion")
        },
        std::path::PathBuf::from,
    );
    Criterion::default().output_directory(&dir)
}

/// The bench's `main`: Criterion's group and main over `targets` (each a
/// `fn(&mut Criterion)`), configured by [`criterion_config`].
#[allow(unused_macros)]
macro_rules! bench_main {
    ($($target:path),+ $(,)?) => {
        criterion::criterion_group! {
            name = benches;
            config = $crate::criterion_home::criterion_config();
            targets = $($target),+
        }
        criterion::criterion_main!(benches);
    };
}

//! A program's arguments as Unicode, read with `std::env::args_os`: one
//! that is not UTF-8 (a Latin-1 file name, say) is a bad argument, told
//! with the program's usage and exit code 2, where `std::env::args` would
//! panic (exit 101). Shared (`#[path]`) by the examples, the benchmarks
//! of benches/ and the binaries of bench-peers/.

/// The arguments after the program's name; on one that is not UTF-8,
/// prints `name: …` and `usage` to stderr and exits with code 2.
pub fn or_exit(name: &str, usage: &str) -> std::vec::IntoIter<String> {
    let args = std::env::args_os()
        .skip(1)
        .map(std::ffi::OsString::into_string)
        .collect::<Result<Vec<_>, _>>();
    match args {
        Ok(args) => args.into_iter(),
        Err(arg) => {
            eprintln!("{name}: an argument that is not UTF-8: {arg:?}\n{usage}");
            std::process::exit(2)
        }
    }
}

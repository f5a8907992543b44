//! Printing an error with its causes, for the examples' messages.

/// `error`'s message, then each of its causes, `: `-separated, as
/// `anyhow`'s `{:#}` prints it: a tickless error says its own level only
/// (`connect to localhost/127.0.0.1:1 failed`) and leaves its cause to
/// `source()` (`Connection refused (os error 111)`), so each is said once.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        message = format!("{message}: {next}");
        cause = next.source();
    }
    message
}

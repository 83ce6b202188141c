fn main() -> std::process::ExitCode {
    dakghar::cli::main()
}

/// Which build this is: what `push-worker --version`, the start-up log line and the `push_build_info` gauge say.
public enum BuildInfo {
    /// The release version (semver), from the `VERSION` file at the package's root.
    public static let version = generatedVersion
    /// The git revision the build comes from (12 hex digits, `-dirty` with uncommitted changes), the build
    /// environment's `PUSH_BUILD_REVISION` where there is no git work tree, or `unknown`.
    public static let revision = generatedRevision

    /// `1.0.0 (0123456789ab)`.
    public static var description: String { "\(version) (\(revision))" }
}

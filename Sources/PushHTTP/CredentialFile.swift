import PushCrypto

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TLS file (a CA bundle, a client certificate or key) read once, with the configuration version that names it: its
/// bytes and their SHA-256, or why it was refused. TLS contexts are built from these bytes and pools keyed by their digest,
/// never by opening the path again, so a file replaced after the version was read (half written, or refused by live
/// configuration) does not reach a new connection.
///
/// The read opens the path without blocking and takes regular files only: a FIFO could block the reader for good (start-up,
/// a live configuration check) and a device may never end. At most `maximumBytes` are read; a bigger file is refused
/// (a CA bundle or a certificate chain is a few KiB; the system bundle under 300 KiB).
public struct CredentialFile: Sendable, Hashable, CustomStringConvertible {
    public static let maximumBytes = 1 << 20

    public let path: String
    /// The bytes read, or why the file was refused.
    public let content: Result<[UInt8], CredentialFileError>
    /// SHA-256 of the bytes read; empty for a refused file.
    public let sha256: [UInt8]

    /// Reads the file at `path` now.
    public init(reading path: String, maximumBytes: Int = CredentialFile.maximumBytes) {
        self.path = path
        content = Self.load(path, maximumBytes: max(0, maximumBytes))
        sha256 = (try? content.get()).map(Digest.sha256) ?? []
    }

    /// The bytes read, or the reason the file was refused.
    public func bytes() throws(CredentialFileError) -> [UInt8] { try content.get() }

    /// Why the file was refused; nil when it was read.
    public var problem: CredentialFileError? {
        if case .failure(let error) = content { error } else { nil }
    }

    public var description: String {
        switch content {
        case .success: "\(path) (sha256:\(Digest.hex(sha256).prefix(12)))"
        case .failure(let error): "\(error)"
        }
    }

    // The digest stands for the bytes: hashing a bundle of up to a MiB for every request's pool lookup would not do.
    public static func == (lhs: CredentialFile, rhs: CredentialFile) -> Bool {
        lhs.path == rhs.path && lhs.sha256 == rhs.sha256 && lhs.problem == rhs.problem
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(path)
        hasher.combine(sha256)
        hasher.combine(problem)
    }

    private static func load(_ path: String, maximumBytes: Int) -> Result<[UInt8], CredentialFileError> {
        // O_NONBLOCK: opening a FIFO for reading does not wait for a writer; O_NOCTTY: a terminal does not become ours.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(.unreadable(path: path)) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            return .failure(.unreadable(path: path))
        }
        let type = status.st_mode & S_IFMT
        guard type == S_IFREG else { return .failure(.notRegularFile(path: path, kind: kind(type))) }
        guard status.st_size <= maximumBytes else { return .failure(.tooLarge(path: path, limit: maximumBytes)) }
        // The file may grow between fstat and read: read one byte past the limit to tell.
        var bytes = [UInt8](repeating: 0, count: maximumBytes + 1)
        var count = 0
        while count < bytes.count {
            let received = bytes.withUnsafeMutableBytes { buffer -> Int in
                read(descriptor, buffer.baseAddress! + count, buffer.count - count)
            }
            if received == 0 { break }
            if received < 0 {
                if errno == EINTR { continue }
                return .failure(.unreadable(path: path))
            }
            count += received
        }
        guard count <= maximumBytes else { return .failure(.tooLarge(path: path, limit: maximumBytes)) }
        bytes.removeSubrange(count...)
        return .success(bytes)
    }

    private static func kind(_ type: mode_t) -> String {
        switch type {
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFDIR: "a directory"
        case S_IFSOCK: "a socket"
        default: "a special file"
        }
    }
}

/// Why a `CredentialFile` was refused.
public enum CredentialFileError: Error, Sendable, Hashable, CustomStringConvertible {
    case unreadable(path: String)
    /// A FIFO, a device, a directory or a socket.
    case notRegularFile(path: String, kind: String)
    case tooLarge(path: String, limit: Int)

    public var description: String {
        switch self {
        case .unreadable(let path): "\(path) does not exist or is not readable"
        case .notRegularFile(let path, let kind): "\(path) is \(kind), not a regular file: refused"
        case .tooLarge(let path, let limit): "\(path) is larger than \(limit >> 10) KiB: refused"
        }
    }
}

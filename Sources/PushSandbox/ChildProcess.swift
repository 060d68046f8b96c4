import CSpawnShim
import Foundation
import Synchronization

/// A child process started with `posix_spawn` that inherits no descriptor but standard input, output
/// and error; its exit is collected with `waitpid`.
///
/// Foundation's `Process` is not used for the sandboxes' children. On this toolchain its `run()` can
/// read past a buffer and crash the whole test process (swift-corelibs-foundation pull request 5472).
/// And it closes the parent's other descriptors in a child by listing them first and spawning after:
/// a child that another thread starts in between inherits whatever was opened meanwhile (a test's
/// sockets, another child's exit-notification socket). Here every descriptor from 3 up is closed
/// inside the child, at the spawn itself.
public final class ChildProcess: Sendable {
    /// Where a standard stream of the child goes.
    public enum Stream: Sendable {
        /// The parent's own stream.
        case inherit
        case null
        /// A file: read for standard input; created or truncated for output.
        case file(String)
        /// For standard error: wherever standard output goes.
        case standardOutput
    }

    public let processIdentifier: pid_t
    /// The exit status once collected.
    private let collected = Mutex<Int32?>(nil)

    public init(
        executable: String, arguments: [String],
        standardInput: Stream = .null, standardOutput: Stream = .null, standardError: Stream = .null
    ) throws {
        var actions = posix_spawn_file_actions_t()
        try Self.check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        try Self.check(push_spawn_file_actions_addclosefrom(&actions, 3), "posix_spawn_file_actions_addclosefrom_np")
        for (descriptor, stream) in [(STDIN_FILENO, standardInput), (STDOUT_FILENO, standardOutput), (STDERR_FILENO, standardError)] {
            let flags = descriptor == STDIN_FILENO ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC
            switch stream {
            case .inherit: break
            case .null: try Self.check(posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", flags, 0o600), "addopen")
            case .file(let path): try Self.check(posix_spawn_file_actions_addopen(&actions, descriptor, path, flags, 0o600), "addopen")
            case .standardOutput: try Self.check(posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, descriptor), "adddup2")
            }
        }

        var attributes = posix_spawnattr_t()
        try Self.check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        // The parent ignores SIGPIPE (network libraries do); an ignored signal stays ignored across exec.
        var defaults = sigset_t(), mask = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        sigemptyset(&mask)
        try Self.check(posix_spawnattr_setsigdefault(&attributes, &defaults), "posix_spawnattr_setsigdefault")
        try Self.check(posix_spawnattr_setsigmask(&attributes, &mask), "posix_spawnattr_setsigmask")
        try Self.check(
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)), "posix_spawnattr_setflags")

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid = pid_t()
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard status == 0 else {
            throw NSError(
                domain: NSPOSIXErrorDomain, code: Int(status),
                userInfo: [NSLocalizedDescriptionKey: "cannot start \(executable): \(String(cString: strerror(status)))"])
        }
        processIdentifier = pid
    }

    /// Waits until the child ends; its exit code, or 128 + the signal that ended it (-1 if unknown).
    @discardableResult
    public func exitStatus() async -> Int32 {
        var pause = 1
        while true {
            if let status = collect(blocking: false) { return status }
            await Self.sleep(milliseconds: pause)
            pause = min(pause * 2, 50)
        }
    }

    /// Whether the child has ended (collecting its exit status if it has).
    public var hasExited: Bool { collect(blocking: false) != nil }

    private static let timer = DispatchQueue(label: "child-process-exit-polls")

    /// Sleeps without ending early when the task is cancelled (a cancelled sleep would make the poll spin).
    private static func sleep(milliseconds: Int) async {
        await withCheckedContinuation { continuation in
            timer.asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { continuation.resume() }
        }
    }

    /// Sends `number` (e.g. SIGSTOP, SIGCONT) unless the child has exited.
    public func signal(_ number: Int32) {
        if collect(blocking: false) != nil { return }
        _ = Foundation.kill(processIdentifier, number)
    }

    /// Kills the child (SIGKILL) and collects its exit, blocking only until the kernel has ended it.
    public func kill() {
        if collect(blocking: false) != nil { return }
        _ = Foundation.kill(processIdentifier, SIGKILL)
        _ = collect(blocking: true)
    }

    private func collect(blocking: Bool) -> Int32? {
        collected.withLock { collected in
            if let collected { return collected }
            var raw: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(processIdentifier, &raw, blocking ? 0 : WNOHANG) } while result == -1 && errno == EINTR
            guard result != 0 else { return nil }
            // -1: the child was collected elsewhere, which nothing here does; report an unknown status rather than wait forever.
            guard result == processIdentifier else {
                collected = -1
                return -1
            }
            let signal = raw & 0x7f
            collected = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
            return collected
        }
    }

    private static func check(_ status: Int32, _ call: String) throws {
        guard status != 0 else { return }
        throw NSError(
            domain: NSPOSIXErrorDomain, code: Int(status),
            userInfo: [NSLocalizedDescriptionKey: "\(call): \(String(cString: strerror(status)))"])
    }
}

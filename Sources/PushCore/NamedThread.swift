import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// An OS thread started under a name that `top -H`, `ps -L`, `perf` and `/proc/<pid>/task/*/comm`
/// show. Foundation's `Thread.name` does not reach the kernel on Linux: without this every thread
/// carries the name of the thread that created it.
public enum NamedThread {
    /// Starts `body` on a new thread named `name` (the kernel keeps its first 15 bytes).
    public static func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            nameCurrentThread(name)
            body()
        }
        thread.name = name
        thread.start()
    }

    /// Names the calling thread for the kernel.
    public static func nameCurrentThread(_ name: String) {
        #if canImport(Glibc)
            var truncated = Substring(name)
            while truncated.utf8.count > 15 { truncated = truncated.dropLast() }
            // What pthread_setname_np does, which Swift's Glibc module does not export.
            let descriptor = open("/proc/thread-self/comm", O_WRONLY)
            guard descriptor >= 0 else { return }
            defer { close(descriptor) }
            var bytes = Array(truncated.utf8)
            _ = write(descriptor, &bytes, bytes.count)
        #endif
    }
}

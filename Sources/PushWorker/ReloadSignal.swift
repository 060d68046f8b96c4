import Dispatch
#if canImport(Glibc)
    import Glibc
#endif

/// SIGHUP: re-read `PUSH_APPS_FILE` and the credential files now (`Worker.reloadConfiguration`; the watcher does it
/// every `PUSH_APPS_RELOAD_S`). The handler runs on a serial queue of its own, one reload at a time; signals that
/// arrive during a reload are merged into the next.
public final class ReloadSignal {
    private let source: any DispatchSourceSignal

    public init(reload: @escaping @Sendable () -> Void) {
        signal(SIGHUP, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "push-worker.sighup"))
        source.setEventHandler(handler: reload)
        source.resume()
    }

    deinit { source.cancel() }
}

import Dispatch
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
    import Glibc
#endif

/// Checks `PUSH_APPS_FILE` and the credential files every `interval` and at once on SIGHUP (when `reloadsOnHangUp`),
/// and applies a new version (`LiveConfiguration`, which logs what changed or why a version was refused, once per
/// version). A check reads and hashes files, so checks run on a thread of their own, one at a time: a SIGHUP during a
/// check waits for it. With neither an interval nor SIGHUP there is nothing to run (`Worker` leaves it out).
struct AppsWatcher: Service {
    let configuration: LiveConfiguration
    /// nil: on SIGHUP only (`PUSH_APPS_RELOAD_S=0`).
    let interval: Duration?
    let reloadsOnHangUp: Bool
    /// Told each check's result (tests).
    let checked: @Sendable (LiveConfiguration.Reload) -> Void
    private let checks = DispatchQueue(label: "push-worker.apps-watcher")

    init(
        configuration: LiveConfiguration, interval: Duration?, reloadsOnHangUp: Bool,
        checked: @escaping @Sendable (LiveConfiguration.Reload) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.interval = interval
        self.reloadsOnHangUp = reloadsOnHangUp
        self.checked = checked
    }

    func run() async {
        let hangUps: UnixSignalsSequence?
        if reloadsOnHangUp {
            // The signal's default action ends the process: ignored until the sequence takes it.
            signal(SIGHUP, SIG_IGN)
            hangUps = await UnixSignalsSequence(trapping: .sighup)
        } else {
            hangUps = nil
        }
        await cancelWhenGracefulShutdown { [self] in
            await withDiscardingTaskGroup { group in
                if let interval {
                    group.addTask {
                        while true {
                            do { try await Task.sleep(for: interval) } catch { return }
                            await check(force: false)
                        }
                    }
                }
                if let hangUps {
                    group.addTask {
                        for await _ in hangUps { await check(force: true) }
                    }
                }
            }
        }
    }

    private func check(force: Bool) async {
        let result = await withCheckedContinuation { continuation in
            checks.async { [configuration] in continuation.resume(returning: configuration.check(force: force)) }
        }
        checked(result)
    }
}

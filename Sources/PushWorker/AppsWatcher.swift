/// Checks `PUSH_APPS_FILE` and the credential files every interval and applies a new version (`LiveConfiguration`,
/// which logs what changed or why a version was refused, once per version). SIGHUP checks at once
/// (`Worker.reloadConfiguration`).
struct AppsWatcher: Sendable {
    let configuration: LiveConfiguration
    let interval: Duration

    func run() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            configuration.check()
        }
    }
}

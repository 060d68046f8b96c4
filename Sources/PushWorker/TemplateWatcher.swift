import Logging
import PushTemplates
import ServiceLifecycle

/// Re-reads `PUSH_TEMPLATES_DIR` every interval (ConfigMap updates land without a restart)
/// and logs what changed; a broken file keeps its last good version and is logged once.
struct TemplateWatcher: Service {
    let templates: TemplateDirectory
    let interval: Duration
    let logger: Logger

    func run() async {
        await cancelWhenGracefulShutdown { [self] in await watch() }
    }

    private func watch() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let reload = templates.reload()
            for problem in reload.problems {
                logger.error("payload template refused; the last good version stays in use", metadata: ["problem": "\(problem)"])
            }
            if !reload.changed.isEmpty {
                logger.notice("payload templates reloaded", metadata: ["files": "\(reload.changed.joined(separator: ","))"])
            }
        }
    }
}

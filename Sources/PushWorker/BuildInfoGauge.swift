import Metrics
import PushBuildInfo

extension BuildInfo {
    /// `push_build_info{version, revision}` at 1, so dashboards and alerts can tell which build each pod runs
    /// (joined on the pod's other series) and when a rollout has finished.
    public static func recordGauge() {
        Gauge(label: "push_build_info", dimensions: [("version", version), ("revision", revision)]).record(1)
    }
}

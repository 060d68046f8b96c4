@testable import PushWorker

/// The start-up problem lines for an environment; empty when it is valid.
func problems(_ environment: [String: String]) -> [String] {
    switch WorkerConfiguration.load(from: environment) {
    case .success: []
    case .failure(let errors): errors.problems
    }
}

import Foundation
import PushBench
import Testing

@Suite("The spine bench's allocation budget")
struct SpineAllocationBudgetTests {
    private func budget(_ perJob: Double, tolerance: Double = 0.1) throws -> SpineBench.AllocationBudget {
        let json = #"{"tolerance": \#(tolerance), "allocationsPerJob": {"debug": \#(perJob), "release": \#(perJob)}}"#
        return try JSONDecoder().decode(SpineBench.AllocationBudget.self, from: Data(json.utf8))
    }

    @Test(
        "a run above its build's budget by more than the tolerance fails the check, up to it passes, and a run that could not count fails")
    func verdicts() throws {
        let budget = try budget(100)
        #expect(throws: Never.self) { try budget.verdict(90).get() }
        #expect(throws: Never.self) { try budget.verdict(110).get() }
        #expect(throws: BenchError.self) { try budget.verdict(111).get() }
        #expect(throws: BenchError.self) { try budget.verdict(nil).get() }
    }

    @Test("the committed budget holds one for the debug build make test runs and one for the release build the docs quote")
    func committedBudget() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../bench/spine-allocations.json")
            .path
        let budget = try SpineBench.AllocationBudget.load(from: path)
        #expect(budget.allocationsPerJob["debug", default: 0] > 0)
        #expect(budget.allocationsPerJob["release", default: 0] > 0)
        #expect(budget.tolerance == 0.1)
    }
}

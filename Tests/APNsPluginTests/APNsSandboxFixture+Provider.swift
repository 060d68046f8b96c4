import PushCore
import PushHTTP
import TestSupport

@testable import APNsPlugin

extension APNsSandboxFixture {
    /// An APNs provider of the fixture's one token-authenticated app, both environments at the sandbox.
    func tokenProvider(templates: any PayloadTemplates = BuiltInPayloads()) throws -> APNsProvider {
        let app = APNsApp(bundleId: Self.bundleId, authentication: .token(keyFile: keyFile, keyId: Self.keyId, teamId: Self.teamId))
        return try APNsProvider(
            configuration: APNsConfiguration(
                apps: [app], productionURL: server.baseURL, sandboxURL: server.baseURL, caFile: tls.caFile),
            transport: TestTransport.make(), logger: testLogger(), templates: templates)
    }
}

import Foundation
import PushSandbox
import Testing
import TestSupport

/// The TLS fixtures are real: checked with redis-cli and openssl, not with our client.
@Suite("Redis TLS fixtures: TLS-only redis-servers with ACL users, as redis-cli and openssl see them")
struct RedisTLSFixtureTests {
    /// What redis-cli printed, without the trailing newline.
    static func cli(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let (status, output) = try await RedisCLI.run(arguments)
        return (status, output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// redis-cli over TLS, trusting the deployment's CA, without credentials or a client certificate.
    static func tlsOnly(_ material: RedisTLSMaterial, port: Int) -> [String] {
        ["-h", "127.0.0.1", "-p", String(port), "--tls", "--cacert", material.caFile]
    }

    static func openssl(_ arguments: [String]) async throws -> Int32 {
        try await ChildProcess.runToEnd(executable: "/usr/bin/openssl", arguments: arguments).status
    }

    @Test("a TLS-only server answers its ACL user over TLS, and its URL is rediss:// with that user")
    func answersItsUser() async throws {
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        let server = try #require(redis.single)
        let acl = try #require(redis.acl)
        #expect(try await Self.cli(server.cliArguments + ["ping"]).output == "PONG")
        #expect(try await Self.cli(server.cliArguments + ["acl", "whoami"]).output == "worker")
        #expect(try await Self.cli(server.cliArguments + ["wait", "0", "0"]).output == "0", "the full user may run WAIT")
        #expect(redis.urlString == "rediss://worker:\(acl.password)@127.0.0.1:\(server.port)/0")
        #expect(redis.serverName == "redis.push.test")
    }

    @Test("a plain connection to the TLS port is not served")
    func plainConnectionRefused() async throws {
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        let server = try #require(redis.single)
        let plain = try await Self.cli(["-h", "127.0.0.1", "-p", String(server.port), "ping"])
        #expect(plain.status != 0)
        #expect(!plain.output.contains("PONG"))
    }

    @Test("the default user is off: without credentials NOAUTH, as `default` WRONGPASS")
    func defaultUserRefused() async throws {
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        let server = try #require(redis.single)
        let material = try #require(redis.tlsMaterial)
        let password = try #require(redis.acl).password
        let anonymous = Self.tlsOnly(material, port: server.port)
        #expect(try await Self.cli(anonymous + ["ping"]).output.hasPrefix("NOAUTH"))
        #expect(try await Self.cli(anonymous + ["auth", "default", password]).output.hasPrefix("WRONGPASS"))
    }

    @Test("a user denied WAIT gets NOPERM naming the command, and may run the others")
    func restrictedUser() async throws {
        let redis = try await RedisTLSDeployment.single.start(deniedCommands: ["wait"])
        defer { redis.stop() }
        let server = try #require(redis.single)
        let denied = try await Self.cli(server.cliArguments + ["wait", "0", "0"]).output
        #expect(denied.hasPrefix("NOPERM"))
        #expect(denied.contains("'wait'"))
        #expect(try await Self.cli(server.cliArguments + ["set", "k", "v"]).output == "OK")
    }

    @Test("with client certificates required, a client without one or with another CA's is refused, one with the CA's is served")
    func mutualTLS() async throws {
        let redis = try await RedisTLSDeployment.single.start(clientCertificates: .required)
        defer { redis.stop() }
        let server = try #require(redis.single)
        let material = try #require(redis.tlsMaterial)
        let acl = try #require(redis.acl)
        let credentials = ["--user", acl.user, "--pass", acl.password, "--no-auth-warning", "ping"]
        let withoutCertificate = try await Self.cli(Self.tlsOnly(material, port: server.port) + credentials)
        #expect(withoutCertificate.output != "PONG")
        let otherCA = try await Self.cli(
            Self.tlsOnly(material, port: server.port) + [
                "--cert", material.unrelatedClientCertFile, "--key", material.unrelatedClientKeyFile,
            ]
                + credentials)
        #expect(otherCA.output != "PONG")
        let ours = try await Self.cli(
            Self.tlsOnly(material, port: server.port) + ["--cert", material.clientCertFile, "--key", material.clientKeyFile] + credentials)
        #expect(ours.output == "PONG")
    }

    @Test("a client that trusts only the unrelated CA cannot verify the server")
    func unrelatedCA() async throws {
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        let server = try #require(redis.single)
        let material = try #require(redis.tlsMaterial)
        let acl = try #require(redis.acl)
        let result = try await Self.cli(
            ["-h", "127.0.0.1", "-p", String(server.port), "--tls", "--cacert", material.unrelatedCAFile]
                + ["--user", acl.user, "--pass", acl.password, "--no-auth-warning", "ping"])
        #expect(result.status != 0)
        #expect(!result.output.contains("PONG"))
    }

    @Test("the server-name-only certificate verifies for redis.push.test and not for 127.0.0.1; the loopback one for both")
    func serverNameOnlyCertificate() async throws {
        let material = try RedisTLSMaterial.make()
        defer { material.remove() }
        func verify(_ certificate: String, _ check: [String]) async throws -> Int32 {
            try await Self.openssl(["verify", "-CAfile", material.caFile] + check + [certificate])
        }
        #expect(try await verify(material.serverNameOnlyCertFile, ["-verify_hostname", RedisTLSMaterial.serverName]) == 0)
        #expect(try await verify(material.serverNameOnlyCertFile, ["-verify_ip", "127.0.0.1"]) != 0)
        #expect(try await verify(material.serverCertFile, ["-verify_hostname", RedisTLSMaterial.serverName]) == 0)
        #expect(try await verify(material.serverCertFile, ["-verify_ip", "127.0.0.1"]) == 0)
        #expect(try await verify(material.serverCertFile, ["-verify_hostname", "localhost"]) == 0)
        #expect(try await verify(material.clientCertFile, ["-purpose", "sslclient"]) == 0)
        #expect(try await Self.openssl(["verify", "-CAfile", material.unrelatedCAFile, material.serverCertFile]) != 0)
    }

    @Test("a server with the server-name-only certificate serves redis-cli, which checks the chain and not the name")
    func serverNameOnlyServer() async throws {
        let redis = try await RedisTLSDeployment.single.start(serverCertificate: .serverNameOnly)
        defer { redis.stop() }
        let server = try #require(redis.single)
        #expect(try await Self.cli(server.cliArguments + ["ping"]).output == "PONG")
    }

    @Test("a TLS server stopped and started again serves on its port, and a replica of it syncs over TLS as the ACL user")
    func restartAndReplica() async throws {
        let material = try RedisTLSMaterial.make()
        defer { material.remove() }
        let master = try await RedisServerProcess.launch(
            options: RedisServerOptions(tls: RedisTLSOptions(material: material, clientCertificates: .required), acl: RedisACL()))
        defer { master.stop() }
        master.stop()
        try await master.start()
        #expect(try await Self.cli(master.cliArguments + ["ping"]).output == "PONG")

        let replica = try await RedisServerProcess.launchReplica(of: master)
        defer { replica.stop() }
        #expect(try await Self.cli(master.cliArguments + ["set", "replicated", "yes"]).output == "OK")
        var copied = ""
        let giveUp = ContinuousClock.now + .seconds(60)
        while copied != "yes", ContinuousClock.now < giveUp {
            try await Task.sleep(for: .milliseconds(50))
            copied = try await Self.cli(replica.cliArguments + ["get", "replicated"]).output
        }
        #expect(copied == "yes")
        #expect(try await Self.cli(replica.cliArguments + ["role"]).output.contains("connected"))
    }

    @Test(
        "a 3-master TLS cluster with replicas, client certificates required: cluster_state:ok over TLS, CLUSTER SLOTS announces the TLS ports"
    )
    func tlsCluster() async throws {
        let material = try RedisTLSMaterial.make()
        defer { material.remove() }
        let cluster = try await RedisClusterProcesses.launch(
            masters: 3, replicasPerMaster: 1,
            tls: RedisTLSOptions(material: material, clientCertificates: .required, serverCertificate: .serverNameOnly), acl: RedisACL())
        defer { cluster.stop() }
        let ports = Set(cluster.nodes.map(\.port))
        for port in ports {
            #expect(await cluster.run(on: port, ["cluster", "info"]).contains("cluster_state:ok"))
        }
        let slots = await cluster.run(on: cluster.nodes[0].port, ["cluster", "slots"]).split(separator: "\n").map(String.init)
        let announced = Set(zip(slots, slots.dropFirst()).filter { $0.0 == "127.0.0.1" }.compactMap { Int($0.1) })
        let masters = Set(await cluster.masterPorts())
        #expect(masters.count == 3)
        #expect(announced.isSubset(of: ports), "nodes announce their TLS ports, the only ones they listen on")
        #expect(masters.isSubset(of: announced), "every master is announced")
        let plain = try await Self.cli(["-h", "127.0.0.1", "-p", String(cluster.nodes[0].port), "ping"])
        #expect(plain.status != 0)
        let password = try #require(cluster.options.acl).password
        #expect(
            cluster.urlString
                == "rediss://worker:\(password)@" + cluster.nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") + "/0")
    }
}

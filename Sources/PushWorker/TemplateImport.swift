import Foundation
import PushPluginAPI
import PushPlugins
import PushTemplates

/// `push-worker import-templates <mizu folder> --output <dir>`: Mizu's message files into a
/// `PUSH_TEMPLATES_DIR`, each change printed, the result checked as `run` would check it.
public enum TemplateImport {
    public struct Report: Sendable {
        public var lines: [String]
        public var succeeded: Bool
    }

    public static func run(from source: String, to output: String, plugins: [any ProviderPlugin] = LinkedPlugins.all) -> Report {
        var lines: [String] = []
        var imported = 0
        for (file, template) in MizuMessageFiles.layout {
            let path = "\(source)/\(file)"
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                lines.append("\(file): not found in \(source), skipped")
                continue
            }
            let conversion = MizuMessageFiles.convert(text)
            let destination = "\(output)/\(template)"
            do {
                try FileManager.default.createDirectory(
                    atPath: (destination as NSString).deletingLastPathComponent,
                    withIntermediateDirectories: true)
                try conversion.template.write(toFile: destination, atomically: true, encoding: .utf8)
            } catch {
                lines.append("\(file): cannot write \(destination): \(error)")
                return Report(lines: lines, succeeded: false)
            }
            imported += 1
            lines.append("\(file) → \(template)")
            lines += conversion.changes.map { "  \($0)" }
        }
        guard imported > 0 else {
            lines.append("no message file (\(MizuMessageFiles.layout.map(\.file).joined(separator: ", "))) in \(source)")
            return Report(lines: lines, succeeded: false)
        }
        switch TemplateDirectory.load(path: output, shapes: plugins.compactMap(\.templateShape)) {
        case .success:
            lines.append("\(output) loads as PUSH_TEMPLATES_DIR")
            return Report(lines: lines, succeeded: true)
        case .failure(let problems):
            lines += problems.lines.map { "problem: \($0)" }
            return Report(lines: lines, succeeded: false)
        }
    }
}

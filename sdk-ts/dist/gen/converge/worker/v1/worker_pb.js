// The converge WorkerService: the one contract between a broker and the workers that run
// provider handler code. Every worker form (Rust, Python and Go SDKs, stdworker exec, WASM,
// Starlark, CEL, or any program that speaks this file) uses exactly this stream.
//
// Conventions that hold for every message below:
// - UUIDs travel as 16 raw bytes; an empty `bytes` UUID means "none".
// - User JSON (spec, status, config, operation input/output) travels as `bytes` holding UTF-8
//   JSON and is never re-encoded by the broker.
// - Times are milliseconds since the Unix epoch; 0 means "not set".
// - Field numbers are the contract: never renumber, and list retired numbers as `reserved`.
import { enumDesc, fileDesc, messageDesc, serviceDesc } from "@bufbuild/protobuf/codegenv2";
/**
 * Describes the file converge/worker/v1/worker.proto.
 */
export const file_converge_worker_v1_worker = /*@__PURE__*/ fileDesc("Ch9jb252ZXJnZS93b3JrZXIvdjEvd29ya2VyLnByb3RvEhJjb252ZXJnZS53b3JrZXIudjEi8gEKE1dvcmtTdHJlYW1DbGllbnRNc2cSMgoJc3Vic2NyaWJlGAEgASgLMh0uY29udmVyZ2Uud29ya2VyLnYxLlN1YnNjcmliZUgAEjUKCGNvbXBsZXRlGAIgASgLMiEuY29udmVyZ2Uud29ya2VyLnYxLlN0YWdlQ29tcGxldGVIABIwCghpbnRlcmVzdBgDIAEoCzIcLmNvbnZlcmdlLndvcmtlci52MS5JbnRlcmVzdEgAEjYKCWhlYXJ0YmVhdBgEIAEoCzIhLmNvbnZlcmdlLndvcmtlci52MS5Xb3JrSGVhcnRiZWF0SABCBgoEYm9keSKWAgoTV29ya1N0cmVhbVNlcnZlck1zZxItCgR0YXNrGAEgASgLMh0uY29udmVyZ2Uud29ya2VyLnYxLlN0YWdlVGFza0gAEjoKBmNvbmZpZxgCIAEoCzIoLmNvbnZlcmdlLndvcmtlci52MS5Qcm92aWRlckNvbmZpZ1VwZGF0ZUgAEi4KA2FjaxgDIAEoCzIfLmNvbnZlcmdlLndvcmtlci52MS5Db21wbGV0ZUFja0gAEjAKBmNhbmNlbBgEIAEoCzIeLmNvbnZlcmdlLndvcmtlci52MS5DYW5jZWxUYXNrSAASKgoFZHJhaW4YBSABKAsyGS5jb252ZXJnZS53b3JrZXIudjEuRHJhaW5IAEIGCgRib2R5IpsBCglTdWJzY3JpYmUSDQoFa2luZHMYASADKAkSFAoMbWF4X2luZmxpZ2h0GAIgASgNEhUKDWtpbmRfdmVyc2lvbnMYAyADKAUSMAoHcmVzdW1lZBgEIAMoCzIfLmNvbnZlcmdlLndvcmtlci52MS5SZXN1bWVkVGFzaxITCgt3b3JrZXJfbmFtZRgFIAEoCRILCgNzZGsYBiABKAkiNwoLUmVzdW1lZFRhc2sSEwoLbGVhc2VfdG9rZW4YASABKAkSEwoLY2xhaW1fZXBvY2gYAiABKAMiOQoNV29ya0hlYXJ0YmVhdBITCgtsZWFzZV90b2tlbhgBIAMoCRITCgtjbGFpbV9lcG9jaBgCIAMoAyJSCghJbnRlcmVzdBIMCgRraW5kGAEgASgJEg4KBmNyZWRpdBgCIAEoBRISCgpoYXNfd29ya2VyGAMgASgIEhQKDGtpbmRfdmVyc2lvbhgEIAEoBSJaChRQcm92aWRlckNvbmZpZ1VwZGF0ZRIMCgRraW5kGAEgASgJEhQKDGtpbmRfdmVyc2lvbhgCIAEoBRIOCgZjb25maWcYAyABKAwSDgoGYnVuZGxlGAQgASgMIqUFCglTdGFnZVRhc2sSKAoFc3RhZ2UYASABKA4yGS5jb252ZXJnZS53b3JrZXIudjEuU3RhZ2USDAoEa2luZBgCIAEoCRIUCgxraW5kX3ZlcnNpb24YAyABKAUSEwoLcmVzb3VyY2VfaWQYBCABKAwSEgoKZ2VuZXJhdGlvbhgFIAEoAxIQCghyZWFjdGlvbhgGIAEoCRITCgtsZWFzZV90b2tlbhgHIAEoCRITCgtjbGFpbV9lcG9jaBgIIAEoAxIYChBtYW5pZmVzdF92ZXJzaW9uGAkgASgDEhcKD3Byb3ZpZGVyX2NvbmZpZxgKIAEoDBIXCg9wcm92aWRlcl9idW5kbGUYCyABKAwSGAoQdGFza19kZWFkbGluZV9tcxgMIAEoAxI5Cgtjb21wb3NlX3JlcRgNIAEoCzIiLmNvbnZlcmdlLndvcmtlci52MS5Db21wb3NlUmVxdWVzdEgAEjMKCHdvcmtfcmVxGA4gASgLMh8uY29udmVyZ2Uud29ya2VyLnYxLldvcmtSZXF1ZXN0SAASNwoKcm9sbHVwX3JlcRgPIAEoCzIhLmNvbnZlcmdlLndvcmtlci52MS5Sb2xsdXBSZXF1ZXN0SAASNwoKZGVsZXRlX3JlcRgQIAEoCzIhLmNvbnZlcmdlLndvcmtlci52MS5EZWxldGVSZXF1ZXN0SAASOQoLb3BlcmF0ZV9yZXEYESABKAsyIi5jb252ZXJnZS53b3JrZXIudjEuT3BlcmF0ZVJlcXVlc3RIABI1CglyZWFjdF9yZXEYEiABKAsyIC5jb252ZXJnZS53b3JrZXIudjEuUmVhY3RSZXF1ZXN0SAASDwoHdHJpZ2dlchgTIAEoCRIPCgdhdHRlbXB0GBQgASgFQgkKB3JlcXVlc3QinwMKCFJlc291cmNlEgoKAmlkGAEgASgMEgwKBGtpbmQYAiABKAkSDAoEbmFtZRgDIAEoCRIQCghvd25lcl9pZBgEIAEoDBIPCgdyb290X2lkGAUgASgMEgwKBHNwZWMYBiABKAwSDgoGc3RhdHVzGAcgASgMEhIKCmdlbmVyYXRpb24YCCABKAMSEgoKc3luY2VkX2dlbhgJIAEoAxIQCghpc19yZWFkeRgKIAEoCBISCgpmaW5hbGl6ZXJzGAsgAygJEiAKGGRlbGV0aW9uX3JlcXVlc3RlZF9hdF9tcxgMIAEoAxIXCg9mcm96ZW5fdW50aWxfbXMYDSABKAMSEwoLcXVhcmFudGluZWQYDiABKAgSOAoGbGFiZWxzGA8gAygLMiguY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlLkxhYmVsc0VudHJ5EhQKDGtpbmRfdmVyc2lvbhgQIAEoBRINCgVwaGFzZRgRIAEoCRotCgtMYWJlbHNFbnRyeRILCgNrZXkYASABKAkSDQoFdmFsdWUYAiABKAk6AjgBIikKC1Jlc291cmNlUmVmEgwKBGtpbmQYASABKAkSDAoEbmFtZRgCIAEoCSI6CglWYWx1ZUZsb3cSFwoPZGVwZW5kZW50X2ZpZWxkGAEgASgJEhQKDHNvdXJjZV9maWVsZBgCIAEoCSK1AQoJQ2hpbGRTcGVjEgwKBGtpbmQYASABKAkSDAoEbmFtZRgCIAEoCRIMCgRzcGVjGAMgASgMEjkKBmxhYmVscxgEIAMoCzIpLmNvbnZlcmdlLndvcmtlci52MS5DaGlsZFNwZWMuTGFiZWxzRW50cnkSFAoMa2luZF92ZXJzaW9uGAUgASgFGi0KC0xhYmVsc0VudHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoCToCOAEilAEKB0RlcEVkZ2USLQoEZnJvbRgBIAEoCzIfLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZVJlZhIrCgJ0bxgCIAEoCzIfLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZVJlZhItCgZ2YWx1ZXMYAyADKAsyHS5jb252ZXJnZS53b3JrZXIudjEuVmFsdWVGbG93ImgKElByb3ZpZGVyQ29uZmlnU3BlYxIMCgRuYW1lGAEgASgJEgwKBGtpbmQYAiABKAkSEgoKaXNfZGVmYXVsdBgDIAEoCBIMCgRzcGVjGAQgASgMEhQKDGtpbmRfdmVyc2lvbhgFIAEoBSJlCglPcGVyYXRpb24SEwoLcmVzb3VyY2VfaWQYASABKAwSDAoEdmVyYhgCIAEoCRINCgVpbnB1dBgDIAEoDBIQCghhdHRlbXB0cxgEIAEoBRIUCgxyZXF1ZXN0ZWRfYnkYBSABKAkigQIKDkNvbXBvc2VSZXF1ZXN0EioKBHJvb3QYASABKAsyHC5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2USLgoIb2JzZXJ2ZWQYAiADKAsyHC5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2USLgoHZGVzaXJlZBgDIAMoCzIdLmNvbnZlcmdlLndvcmtlci52MS5DaGlsZFNwZWMSKgoFZWRnZXMYBCADKAsyGy5jb252ZXJnZS53b3JrZXIudjEuRGVwRWRnZRI3Cgdjb25maWdzGAUgAygLMiYuY29udmVyZ2Uud29ya2VyLnYxLlByb3ZpZGVyQ29uZmlnU3BlYyJNCgtXb3JrUmVxdWVzdBIuCghyZXNvdXJjZRgBIAEoCzIcLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZRIOCgZzdGF0dXMYAiABKAwi0AEKDVJvbGx1cFJlcXVlc3QSKgoEcm9vdBgBIAEoCzIcLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZRIxCgtkZXNjZW5kYW50cxgCIAMoCzIcLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZRIOCgZzdGF0dXMYAyABKAwSMgoHc3VtbWFyeRgEIAEoCzIhLmNvbnZlcmdlLndvcmtlci52MS5Sb2xsdXBTdW1tYXJ5EhwKFGRlc2NlbmRhbnRzX2luY2x1ZGVkGAUgASgIIpMDCg1Sb2xsdXBTdW1tYXJ5Eg0KBXRvdGFsGAEgASgDEkAKCGJ5X3BoYXNlGAIgAygLMi4uY29udmVyZ2Uud29ya2VyLnYxLlJvbGx1cFN1bW1hcnkuQnlQaGFzZUVudHJ5Ej4KB2J5X2tpbmQYAyADKAsyLS5jb252ZXJnZS53b3JrZXIudjEuUm9sbHVwU3VtbWFyeS5CeUtpbmRFbnRyeRIvCgZmYWlsZWQYBCADKAsyHy5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2VSZWYSMgoJbm90X3JlYWR5GAUgAygLMh8uY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlUmVmEhQKDGZhaWxlZF90b3RhbBgGIAEoAxIXCg9ub3RfcmVhZHlfdG90YWwYByABKAMaLgoMQnlQaGFzZUVudHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoAzoCOAEaLQoLQnlLaW5kRW50cnkSCwoDa2V5GAEgASgJEg0KBXZhbHVlGAIgASgDOgI4ASJ+ChZMaXN0RGVzY2VuZGFudHNSZXF1ZXN0EhMKC3Jlc291cmNlX2lkGAEgASgMEhMKC2xlYXNlX3Rva2VuGAIgASgJEhMKC2NsYWltX2Vwb2NoGAMgASgDEhIKCnBhZ2VfdG9rZW4YBCABKAwSEQoJcGFnZV9zaXplGAUgASgNImUKF0xpc3REZXNjZW5kYW50c1Jlc3BvbnNlEjEKC2Rlc2NlbmRhbnRzGAEgAygLMhwuY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlEhcKD25leHRfcGFnZV90b2tlbhgCIAEoDCI/Cg1EZWxldGVSZXF1ZXN0Ei4KCHJlc291cmNlGAEgASgLMhwuY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlInIKDk9wZXJhdGVSZXF1ZXN0Ei4KCHJlc291cmNlGAEgASgLMhwuY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlEjAKCW9wZXJhdGlvbhgCIAEoCzIdLmNvbnZlcmdlLndvcmtlci52MS5PcGVyYXRpb24ihwEKDFJlYWN0UmVxdWVzdBIuCghyZXNvdXJjZRgBIAEoCzIcLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZRIyCgp0cmFuc2l0aW9uGAIgASgOMh4uY29udmVyZ2Uud29ya2VyLnYxLlRyYW5zaXRpb24SEwoLZGVkdXBfdG9rZW4YAyABKAkiSgoJQ29uZGl0aW9uEgwKBHR5cGUYASABKAkSDgoGc3RhdHVzGAIgASgJEg4KBnJlYXNvbhgDIAEoCRIPCgdtZXNzYWdlGAQgASgJIucBCg1Db21wb3NlUmVzdWx0Ei4KB2Rlc2lyZWQYASADKAsyHS5jb252ZXJnZS53b3JrZXIudjEuQ2hpbGRTcGVjEioKBWVkZ2VzGAIgAygLMhsuY29udmVyZ2Uud29ya2VyLnYxLkRlcEVkZ2USNwoHY29uZmlncxgDIAMoCzImLmNvbnZlcmdlLndvcmtlci52MS5Qcm92aWRlckNvbmZpZ1NwZWMSDgoGc3RhdHVzGAQgASgMEjEKCmNvbmRpdGlvbnMYBSADKAsyHS5jb252ZXJnZS53b3JrZXIudjEuQ29uZGl0aW9uIqkCCg1TdGFnZUNvbXBsZXRlEhMKC2xlYXNlX3Rva2VuGAEgASgJEigKBXN0YWdlGAIgASgOMhkuY29udmVyZ2Uud29ya2VyLnYxLlN0YWdlEg4KBnN0YXR1cxgDIAEoDBIxCgpjb25kaXRpb25zGAQgAygLMh0uY29udmVyZ2Uud29ya2VyLnYxLkNvbmRpdGlvbhIyCgdjb21wb3NlGAUgASgLMiEuY29udmVyZ2Uud29ya2VyLnYxLkNvbXBvc2VSZXN1bHQSDgoGb3V0cHV0GAYgASgMEhUKDWVycm9yX21lc3NhZ2UYByABKAkSFAoMZmFpbGVkX3N0YWdlGAggASgFEhAKCHRlcm1pbmFsGAkgASgIEhMKC2NsYWltX2Vwb2NoGAogASgDIkkKC0NvbXBsZXRlQWNrEhMKC2xlYXNlX3Rva2VuGAEgASgJEhMKC2NsYWltX2Vwb2NoGAIgASgDEhAKCGFjY2VwdGVkGAMgASgIIkYKCkNhbmNlbFRhc2sSEwoLbGVhc2VfdG9rZW4YASABKAkSEwoLY2xhaW1fZXBvY2gYAiABKAMSDgoGcmVhc29uGAMgASgJIiwKBURyYWluEg4KBnJlYXNvbhgBIAEoCRITCgtkZWFkbGluZV9tcxgCIAEoAyJAChhHZXRQcm92aWRlckNvbmZpZ1JlcXVlc3QSDQoFa2luZHMYASADKAkSFQoNa2luZF92ZXJzaW9ucxgCIAMoBSJVChlHZXRQcm92aWRlckNvbmZpZ1Jlc3BvbnNlEjgKB2VudHJpZXMYASADKAsyJy5jb252ZXJnZS53b3JrZXIudjEuUHJvdmlkZXJDb25maWdFbnRyeSJZChNQcm92aWRlckNvbmZpZ0VudHJ5EgwKBGtpbmQYASABKAkSFAoMa2luZF92ZXJzaW9uGAIgASgFEg4KBmNvbmZpZxgDIAEoDBIOCgZidW5kbGUYBCABKAwqiQEKBVN0YWdlEhUKEVNUQUdFX1VOU1BFQ0lGSUVEEAASEQoNU1RBR0VfQ09NUE9TRRABEg4KClNUQUdFX1dPUksQAhIQCgxTVEFHRV9ST0xMVVAQAxIQCgxTVEFHRV9ERUxFVEUQBBIRCg1TVEFHRV9PUEVSQVRFEAUSDwoLU1RBR0VfUkVBQ1QQBiqfAQoKVHJhbnNpdGlvbhIaChZUUkFOU0lUSU9OX1VOU1BFQ0lGSUVEEAASFgoSVFJBTlNJVElPTl9DUkVBVEVEEAESFQoRVFJBTlNJVElPTl9TWU5DRUQQAhIXChNUUkFOU0lUSU9OX0RFR1JBREVEEAMSFQoRVFJBTlNJVElPTl9GQUlMRUQQBBIWChJUUkFOU0lUSU9OX0RFTEVURUQQBTLRAgoNV29ya2VyU2VydmljZRJiCgpXb3JrU3RyZWFtEicuY29udmVyZ2Uud29ya2VyLnYxLldvcmtTdHJlYW1DbGllbnRNc2caJy5jb252ZXJnZS53b3JrZXIudjEuV29ya1N0cmVhbVNlcnZlck1zZygBMAEScAoRR2V0UHJvdmlkZXJDb25maWcSLC5jb252ZXJnZS53b3JrZXIudjEuR2V0UHJvdmlkZXJDb25maWdSZXF1ZXN0Gi0uY29udmVyZ2Uud29ya2VyLnYxLkdldFByb3ZpZGVyQ29uZmlnUmVzcG9uc2USagoPTGlzdERlc2NlbmRhbnRzEiouY29udmVyZ2Uud29ya2VyLnYxLkxpc3REZXNjZW5kYW50c1JlcXVlc3QaKy5jb252ZXJnZS53b3JrZXIudjEuTGlzdERlc2NlbmRhbnRzUmVzcG9uc2VCJ1olY29udmVyZ2UuZGV2L3Nkay1nby93b3JrZXJwYjt3b3JrZXJwYmIGcHJvdG8z");
/**
 * Describes the message converge.worker.v1.WorkStreamClientMsg.
 * Use `create(WorkStreamClientMsgSchema)` to create a new message.
 */
export const WorkStreamClientMsgSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 0);
/**
 * Describes the message converge.worker.v1.WorkStreamServerMsg.
 * Use `create(WorkStreamServerMsgSchema)` to create a new message.
 */
export const WorkStreamServerMsgSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 1);
/**
 * Describes the message converge.worker.v1.Subscribe.
 * Use `create(SubscribeSchema)` to create a new message.
 */
export const SubscribeSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 2);
/**
 * Describes the message converge.worker.v1.ResumedTask.
 * Use `create(ResumedTaskSchema)` to create a new message.
 */
export const ResumedTaskSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 3);
/**
 * Describes the message converge.worker.v1.WorkHeartbeat.
 * Use `create(WorkHeartbeatSchema)` to create a new message.
 */
export const WorkHeartbeatSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 4);
/**
 * Describes the message converge.worker.v1.Interest.
 * Use `create(InterestSchema)` to create a new message.
 */
export const InterestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 5);
/**
 * Describes the message converge.worker.v1.ProviderConfigUpdate.
 * Use `create(ProviderConfigUpdateSchema)` to create a new message.
 */
export const ProviderConfigUpdateSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 6);
/**
 * Describes the message converge.worker.v1.StageTask.
 * Use `create(StageTaskSchema)` to create a new message.
 */
export const StageTaskSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 7);
/**
 * Describes the message converge.worker.v1.Resource.
 * Use `create(ResourceSchema)` to create a new message.
 */
export const ResourceSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 8);
/**
 * Describes the message converge.worker.v1.ResourceRef.
 * Use `create(ResourceRefSchema)` to create a new message.
 */
export const ResourceRefSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 9);
/**
 * Describes the message converge.worker.v1.ValueFlow.
 * Use `create(ValueFlowSchema)` to create a new message.
 */
export const ValueFlowSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 10);
/**
 * Describes the message converge.worker.v1.ChildSpec.
 * Use `create(ChildSpecSchema)` to create a new message.
 */
export const ChildSpecSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 11);
/**
 * Describes the message converge.worker.v1.DepEdge.
 * Use `create(DepEdgeSchema)` to create a new message.
 */
export const DepEdgeSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 12);
/**
 * Describes the message converge.worker.v1.ProviderConfigSpec.
 * Use `create(ProviderConfigSpecSchema)` to create a new message.
 */
export const ProviderConfigSpecSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 13);
/**
 * Describes the message converge.worker.v1.Operation.
 * Use `create(OperationSchema)` to create a new message.
 */
export const OperationSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 14);
/**
 * Describes the message converge.worker.v1.ComposeRequest.
 * Use `create(ComposeRequestSchema)` to create a new message.
 */
export const ComposeRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 15);
/**
 * Describes the message converge.worker.v1.WorkRequest.
 * Use `create(WorkRequestSchema)` to create a new message.
 */
export const WorkRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 16);
/**
 * Describes the message converge.worker.v1.RollupRequest.
 * Use `create(RollupRequestSchema)` to create a new message.
 */
export const RollupRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 17);
/**
 * Describes the message converge.worker.v1.RollupSummary.
 * Use `create(RollupSummarySchema)` to create a new message.
 */
export const RollupSummarySchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 18);
/**
 * Describes the message converge.worker.v1.ListDescendantsRequest.
 * Use `create(ListDescendantsRequestSchema)` to create a new message.
 */
export const ListDescendantsRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 19);
/**
 * Describes the message converge.worker.v1.ListDescendantsResponse.
 * Use `create(ListDescendantsResponseSchema)` to create a new message.
 */
export const ListDescendantsResponseSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 20);
/**
 * Describes the message converge.worker.v1.DeleteRequest.
 * Use `create(DeleteRequestSchema)` to create a new message.
 */
export const DeleteRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 21);
/**
 * Describes the message converge.worker.v1.OperateRequest.
 * Use `create(OperateRequestSchema)` to create a new message.
 */
export const OperateRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 22);
/**
 * Describes the message converge.worker.v1.ReactRequest.
 * Use `create(ReactRequestSchema)` to create a new message.
 */
export const ReactRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 23);
/**
 * Describes the message converge.worker.v1.Condition.
 * Use `create(ConditionSchema)` to create a new message.
 */
export const ConditionSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 24);
/**
 * Describes the message converge.worker.v1.ComposeResult.
 * Use `create(ComposeResultSchema)` to create a new message.
 */
export const ComposeResultSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 25);
/**
 * Describes the message converge.worker.v1.StageComplete.
 * Use `create(StageCompleteSchema)` to create a new message.
 */
export const StageCompleteSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 26);
/**
 * Describes the message converge.worker.v1.CompleteAck.
 * Use `create(CompleteAckSchema)` to create a new message.
 */
export const CompleteAckSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 27);
/**
 * Describes the message converge.worker.v1.CancelTask.
 * Use `create(CancelTaskSchema)` to create a new message.
 */
export const CancelTaskSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 28);
/**
 * Describes the message converge.worker.v1.Drain.
 * Use `create(DrainSchema)` to create a new message.
 */
export const DrainSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 29);
/**
 * Describes the message converge.worker.v1.GetProviderConfigRequest.
 * Use `create(GetProviderConfigRequestSchema)` to create a new message.
 */
export const GetProviderConfigRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 30);
/**
 * Describes the message converge.worker.v1.GetProviderConfigResponse.
 * Use `create(GetProviderConfigResponseSchema)` to create a new message.
 */
export const GetProviderConfigResponseSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 31);
/**
 * Describes the message converge.worker.v1.ProviderConfigEntry.
 * Use `create(ProviderConfigEntrySchema)` to create a new message.
 */
export const ProviderConfigEntrySchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 32);
/**
 * Stage names the step of the reconcile pipeline a task asks the worker to run.
 *
 * @generated from enum converge.worker.v1.Stage
 */
export var Stage;
(function (Stage) {
    /**
     * Never sent; a task with this stage is malformed.
     *
     * @generated from enum value: STAGE_UNSPECIFIED = 0;
     */
    Stage[Stage["UNSPECIFIED"] = 0] = "UNSPECIFIED";
    /**
     * Produce desired children, dependency edges and configs for a composite resource.
     *
     * @generated from enum value: STAGE_COMPOSE = 1;
     */
    Stage[Stage["COMPOSE"] = 1] = "COMPOSE";
    /**
     * Reconcile a resource against the outside world and report observed status.
     *
     * @generated from enum value: STAGE_WORK = 2;
     */
    Stage[Stage["WORK"] = 2] = "WORK";
    /**
     * Aggregate the status of a composite once its descendants have settled.
     *
     * @generated from enum value: STAGE_ROLLUP = 3;
     */
    Stage[Stage["ROLLUP"] = 3] = "ROLLUP";
    /**
     * Tear down what a finalizer guards before the resource row is removed.
     *
     * @generated from enum value: STAGE_DELETE = 4;
     */
    Stage[Stage["DELETE"] = 4] = "DELETE";
    /**
     * Run an operator verb (an imperative operation) against a resource.
     *
     * @generated from enum value: STAGE_OPERATE = 5;
     */
    Stage[Stage["OPERATE"] = 5] = "OPERATE";
    /**
     * Run a reactor's side effect for a lifecycle transition of a watched resource.
     *
     * @generated from enum value: STAGE_REACT = 6;
     */
    Stage[Stage["REACT"] = 6] = "REACT";
})(Stage || (Stage = {}));
/**
 * Describes the enum converge.worker.v1.Stage.
 */
export const StageSchema = /*@__PURE__*/ enumDesc(file_converge_worker_v1_worker, 0);
/**
 * Transition is the closed set of lifecycle edges a reactor binding can subscribe to.
 *
 * @generated from enum converge.worker.v1.Transition
 */
export var Transition;
(function (Transition) {
    /**
     * Never sent for a reactor task.
     *
     * @generated from enum value: TRANSITION_UNSPECIFIED = 0;
     */
    Transition[Transition["UNSPECIFIED"] = 0] = "UNSPECIFIED";
    /**
     * The resource was created.
     *
     * @generated from enum value: TRANSITION_CREATED = 1;
     */
    Transition[Transition["CREATED"] = 1] = "CREATED";
    /**
     * The resource reached synced_gen >= generation.
     *
     * @generated from enum value: TRANSITION_SYNCED = 2;
     */
    Transition[Transition["SYNCED"] = 2] = "SYNCED";
    /**
     * The resource became synced but unhealthy.
     *
     * @generated from enum value: TRANSITION_DEGRADED = 3;
     */
    Transition[Transition["DEGRADED"] = 3] = "DEGRADED";
    /**
     * The resource's reconcile failed for its live spec.
     *
     * @generated from enum value: TRANSITION_FAILED = 4;
     */
    Transition[Transition["FAILED"] = 4] = "FAILED";
    /**
     * The resource was deleted.
     *
     * @generated from enum value: TRANSITION_DELETED = 5;
     */
    Transition[Transition["DELETED"] = 5] = "DELETED";
})(Transition || (Transition = {}));
/**
 * Describes the enum converge.worker.v1.Transition.
 */
export const TransitionSchema = /*@__PURE__*/ enumDesc(file_converge_worker_v1_worker, 1);
/**
 * WorkerService is served by every broker. A worker dials in, subscribes to the kinds it
 * serves, and receives tasks on one bidirectional stream.
 *
 * @generated from service converge.worker.v1.WorkerService
 */
export const WorkerService = /*@__PURE__*/ serviceDesc(file_converge_worker_v1_worker, 0);
//# sourceMappingURL=worker_pb.js.map
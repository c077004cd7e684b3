"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<4x32xf32>) -> tensor<4x8xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x32xf32>):
    %0 = "stablehlo.constant"() <{value = dense_resource<__elided__> : tensor<32x64xf32>}> : () -> tensor<32x64xf32>
    %1 = "stablehlo.constant"() <{value = dense_resource<__elided__> : tensor<64x8xf32>}> : () -> tensor<64x8xf32>
    %2 = "stablehlo.dot_general"(%arg0, %0) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x32xf32>, tensor<32x64xf32>) -> tensor<4x64xf32>
    %3 = "stablehlo.tanh"(%2) : (tensor<4x64xf32>) -> tensor<4x64xf32>
    %4 = "stablehlo.dot_general"(%3, %1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
    %5 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %6 = "stablehlo.broadcast_in_dim"(%5) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x8xf32>
    %7 = "stablehlo.add"(%4, %6) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "func.return"(%7) : (tensor<4x8xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()

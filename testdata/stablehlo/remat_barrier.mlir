"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<16x16xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<16x16xf32>, %arg1: tensor<4x16xf32>):
    %0 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x16xf32>
    %2:3 = "stablehlo.optimization_barrier"(%arg1, %arg0, %1) : (tensor<4x16xf32>, tensor<16x16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16x16xf32>, tensor<4x16xf32>)
    %3 = "stablehlo.dot_general"(%2#0, %2#1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
    %4 = "stablehlo.tanh"(%3) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %5 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %6 = "stablehlo.broadcast_in_dim"(%5) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x16xf32>
    %7 = "stablehlo.subtract"(%6, %4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %8 = "stablehlo.dot_general"(%2#2, %4) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
    %9 = "stablehlo.transpose"(%8) <{permutation = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32>
    %10 = "stablehlo.dot_general"(%2#2, %2#1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
    %11 = "stablehlo.multiply"(%10, %7) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %12 = "stablehlo.multiply"(%11, %4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %13 = "stablehlo.add"(%11, %12) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %14 = "stablehlo.dot_general"(%13, %2#0) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
    %15 = "stablehlo.transpose"(%14) <{permutation = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32>
    %16 = "stablehlo.add"(%9, %15) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    "func.return"(%16) : (tensor<16x16xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()

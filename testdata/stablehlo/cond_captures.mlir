"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}, {}, {}], function_type = (tensor<f32>, tensor<16x16xf32>, tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<f32>, %arg1: tensor<16x16xf32>, %arg2: tensor<16x16xf32>):
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.compare"(%arg0, %0) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = "stablehlo.convert"(%1) : (tensor<i1>) -> tensor<i32>
    %3:2 = "stablehlo.case"(%2) ({
      %6 = "stablehlo.transpose"(%arg1) <{permutation = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32>
      %7 = "stablehlo.constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
      %8 = "stablehlo.broadcast_in_dim"(%7) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<16x16xf32>
      %9 = "stablehlo.multiply"(%arg1, %8) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
      "stablehlo.return"(%6, %9) : (tensor<16x16xf32>, tensor<16x16xf32>) -> ()
    }, {
      %4 = "stablehlo.dot_general"(%arg1, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
      %5 = "stablehlo.tanh"(%arg1) : (tensor<16x16xf32>) -> tensor<16x16xf32>
      "stablehlo.return"(%4, %5) : (tensor<16x16xf32>, tensor<16x16xf32>) -> ()
    }) : (tensor<i32>) -> (tensor<16x16xf32>, tensor<16x16xf32>)
    "func.return"(%3#0, %3#1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
